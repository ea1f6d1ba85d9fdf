//! [`LocalFrame`]: a sparse frame's files in a local directory, opened by
//! their paths.

use super::frame::{FrameFiles, MAX_CHUNKS};
use crate::error::Result;
use crate::io::{ByPath, FileSource, LazyFile, Source};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
        Arc::new(LazyFile::new(self.dir.join(name), ByPath))
    }
}
