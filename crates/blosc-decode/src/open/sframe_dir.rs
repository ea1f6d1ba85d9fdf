//! [`LocalFrame`]: a sparse frame's files in a local directory, opened by
//! their paths.

use super::frame::{FrameFiles, MAX_CHUNKS};
use crate::error::Result;
use crate::io::{Access, FileSource, Source, Stamp};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The files of the sparse frame in the directory `dir`: the index and the
/// chunk files opened by their paths under it (a symbolic link is followed
/// like any path). A chunk file is opened for each read and closed after
/// it, so a frame of any number of chunk files holds no descriptor between
/// reads; each must be the version first read.
pub struct LocalFrame {
    dir: PathBuf,
}

impl LocalFrame {
    /// The sparse frame in the directory `dir`.
    pub fn new(dir: &Path) -> LocalFrame {
        LocalFrame {
            dir: dir.to_path_buf(),
        }
    }
}

impl FrameFiles for LocalFrame {
    fn path(&self) -> &Path {
        &self.dir
    }
    fn entries(&self) -> u64 {
        std::fs::read_dir(&self.dir)
            .map(|d| d.take(MAX_CHUNKS as usize).count() as u64)
            .unwrap_or(0)
    }
    fn index(&self) -> Result<Arc<dyn Source>> {
        Ok(Arc::new(FileSource::open(
            &self.dir.join("chunks.b2frame"),
        )?))
    }
    fn chunk(&self, name: &str) -> Arc<dyn Source> {
        Arc::new(ChunkFile {
            path: self.dir.join(name),
            first: OnceLock::new(),
        })
    }
}

/// A chunk file, opened for each read.
struct ChunkFile {
    path: PathBuf,
    /// The file's version at its first open (its length among it).
    first: OnceLock<Stamp>,
}

impl ChunkFile {
    /// Run `f` on the file opened for this call, the version first opened.
    fn with<R>(&self, f: impl FnOnce(&FileSource) -> Result<R>) -> Result<R> {
        let file = FileSource::open(&self.path)?;
        let first = *self.first.get_or_init(|| file.stamp());
        first.check(file.stamp(), &self.path)?;
        f(&file)
    }
}

impl Source for ChunkFile {
    /// The file's length; if it cannot be opened, `u64::MAX`, so that
    /// length checks pass and the read itself reports the open error (with
    /// the file's name).
    fn len(&self) -> u64 {
        if let Some(first) = self.first.get() {
            return first.size;
        }
        self.with(|f| Ok(f.len())).unwrap_or(u64::MAX)
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.with(|f| f.read_exact_at(offset, buf))
    }
    fn read_span<'a>(
        &self,
        offset: u64,
        len: usize,
        access: Access,
        scratch: &'a mut Vec<u8>,
    ) -> Result<(&'a [u8], bool)> {
        self.with(|f| f.read_span(offset, len, access, scratch))
    }
    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }
}
