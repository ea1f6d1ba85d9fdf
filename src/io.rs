//! The one I/O trait: positional reads from a source of bytes.
//!
//! Parsing code never touches files; containers hold `Arc<dyn Source>` and ask
//! for exactly the byte ranges they need. Positional reads (not mmap) mean a
//! source truncated underneath us gives an error, never `SIGBUS`.

use crate::error::{Error, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub trait Source: Send + Sync {
    /// Length in bytes as known when the source was opened.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` from `offset`, or fail (a short source is `Truncated`).
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Path for messages, if this source is a file.
    fn path(&self) -> Option<&Path> {
        None
    }
}

/// Read `len` bytes at `offset` into a fresh vector, after checking the range
/// lies inside the source (so a lying size never drives a huge allocation).
pub fn read_vec(src: &dyn Source, offset: u64, len: u64) -> Result<Vec<u8>> {
    let end = offset
        .checked_add(len)
        .ok_or_else(|| Error::corrupt("offset overflow"))?;
    if end > src.len() {
        return Err(Error::truncated(format!(
            "needs bytes {offset}..{end} but the source has {}",
            src.len()
        )));
    }
    let mut v = vec![0u8; len as usize];
    src.read_exact_at(offset, &mut v)?;
    Ok(v)
}

pub struct FileSource {
    file: File,
    len: u64,
    path: PathBuf,
}

impl FileSource {
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::from(e).in_file(path))?;
        let len = file
            .metadata()
            .map_err(|e| Error::from(e).in_file(path))?
            .len();
        Ok(FileSource {
            file,
            len,
            path: path.to_path_buf(),
        })
    }
}

impl Source for FileSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file.read_exact_at(buf, offset).map_err(|e| {
            let mut err = Error::from(e);
            if err.kind == crate::error::ErrorKind::Truncated {
                err.reason = format!(
                    "source shorter than expected reading {} bytes at {offset}",
                    buf.len()
                );
            }
            err
        })
    }
    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }
}

/// An in-memory source (tests, fuzzing, and small decoded structures).
pub struct MemSource(pub Arc<[u8]>);

impl MemSource {
    pub fn new(data: impl Into<Arc<[u8]>>) -> Self {
        MemSource(data.into())
    }
}

impl Source for MemSource {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let start = usize::try_from(offset).map_err(|_| Error::truncated("offset too large"))?;
        let end = start
            .checked_add(buf.len())
            .filter(|&e| e <= self.0.len())
            .ok_or_else(|| {
                Error::truncated(format!(
                    "needs {} bytes at {offset} but the source has {}",
                    buf.len(),
                    self.0.len()
                ))
            })?;
        buf.copy_from_slice(&self.0[start..end]);
        Ok(())
    }
}

/// A file opened on first use (sparse frames may have thousands of chunk
/// files; most are never read).
pub struct LazyFileSource {
    path: PathBuf,
    file: std::sync::OnceLock<FileSource>,
}

impl LazyFileSource {
    pub fn new(path: PathBuf) -> Self {
        LazyFileSource {
            path,
            file: std::sync::OnceLock::new(),
        }
    }
    fn get(&self) -> Result<&FileSource> {
        if let Some(f) = self.file.get() {
            return Ok(f);
        }
        let f = FileSource::open(&self.path)?;
        Ok(self.file.get_or_init(|| f))
    }
}

impl Source for LazyFileSource {
    /// The file's length; if it cannot be opened, `u64::MAX`, so that
    /// length checks pass and the read itself reports the open error (with
    /// the file's name) instead of a misleading "source has 0 bytes".
    fn len(&self) -> u64 {
        self.get().map(|f| f.len()).unwrap_or(u64::MAX)
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.get()?.read_exact_at(offset, buf)
    }
    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }
}
