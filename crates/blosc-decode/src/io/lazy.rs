//! [`LazyFile`]: a file opened on its first read by an [`Opener`] the
//! caller gives, which also says whether it may stay open.

use super::{Access, FileSource, Source, Span, Stamp};
use crate::error::Result;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// How a [`LazyFile`] opens its file, and whether an opened file may stay
/// open (a budget of descriptors, say).
pub trait Opener: Send + Sync {
    /// What an opened file is read through: a [`FileSource`], or a source
    /// of the caller's wrapping one (with its own block reads, say).
    type File: Source + AsRef<FileSource>;
    /// Open the file at `path` for reading.
    fn open(&self, path: &Path) -> Result<Self::File>;
    /// Take a place for one file kept open: `false` if there is none, and
    /// the file is opened for each read and closed after it. The default
    /// keeps no file open, so a source of many files holds no descriptor
    /// between reads.
    fn keep(&self) -> bool {
        false
    }
    /// Give back a place [`Opener::keep`] gave.
    fn release(&self) {}
}

/// Files opened by their paths (a symbolic link followed like any path),
/// none kept open.
pub struct ByPath;

impl Opener for ByPath {
    type File = FileSource;
    fn open(&self, path: &Path) -> Result<FileSource> {
        FileSource::open(path)
    }
}

/// A file opened on its first read (a sparse frame may have thousands of
/// chunk files; most are never read) and kept open if its [`Opener`] has
/// a place for it, else opened for each read. A file opened again must be
/// the version first opened (else the read fails as `Changed`).
pub struct LazyFile<O: Opener> {
    path: PathBuf,
    opener: O,
    kept: OnceLock<O::File>,
    /// The file's version at its first open (its length among it).
    first: OnceLock<Stamp>,
}

impl<O: Opener> LazyFile<O> {
    /// The file at `path`, opened by `opener` on its first read.
    pub fn new(path: PathBuf, opener: O) -> Self {
        LazyFile {
            path,
            opener,
            kept: OnceLock::new(),
            first: OnceLock::new(),
        }
    }

    /// Run `f` on the file: the one kept open, or one opened for this call.
    fn with<R>(&self, f: impl FnOnce(&O::File) -> Result<R>) -> Result<R> {
        if let Some(k) = self.kept.get() {
            return f(k);
        }
        let file = self.opener.open(&self.path)?;
        let stamp = file.as_ref().stamp();
        let first = *self.first.get_or_init(|| stamp);
        first.check(stamp, &self.path)?;
        if !self.opener.keep() {
            return f(&file);
        }
        if let Err(ours) = self.kept.set(file) {
            // Another thread kept its own: use that one.
            self.opener.release();
            drop(ours);
        }
        f(self.kept.get().expect("kept by this or another thread"))
    }
}

impl<O: Opener> Drop for LazyFile<O> {
    fn drop(&mut self) {
        if self.kept.get().is_some() {
            self.opener.release();
        }
    }
}

impl<O: Opener> Source for LazyFile<O> {
    /// The file's length; if it cannot be opened, `u64::MAX`, so that
    /// length checks pass and the read itself reports the open error (with
    /// the file's name) instead of a misleading "source has 0 bytes".
    fn len(&self) -> u64 {
        if let Some(first) = self.first.get() {
            return first.size;
        }
        self.with(|f| Ok(f.len())).unwrap_or(u64::MAX)
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.with(|f| f.read_exact_at(offset, buf))
    }
    fn gone(&self) -> bool {
        self.kept.get().is_some_and(|f| f.gone())
    }
    /// Forwarded while the file is kept open (a hint never opens a file: a
    /// sparse frame's thousands of chunk files would each hold a
    /// descriptor).
    fn will_need(&self, offset: u64, len: u64) {
        if let Some(f) = self.kept.get() {
            f.will_need(offset, len);
        }
    }
    fn read_span<'a>(
        &self,
        offset: u64,
        len: usize,
        access: Access,
        scratch: &'a mut Vec<u8>,
    ) -> Result<(Span<'a>, bool)> {
        self.with(|f| f.read_span(offset, len, access, scratch))
    }
    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }
}
