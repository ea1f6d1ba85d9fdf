//! The files of a remote tree: a plain object read as raw bytes, and the
//! files of a sparse frame under a prefix.

use super::SFRAME_INDEX;
use crate::fs::source_tree::{Meta, RawFile};
use crate::fs::Error;
use blosc_decode::io::Source;
use blosc_decode::open::FrameFiles;
use bloscfs_remote::{Object, Remote, RemoteObject};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A plain object read as raw bytes (the version listed when it was opened).
pub(super) struct RemoteRaw {
    pub obj: Arc<RemoteObject>,
    pub meta: Meta,
}

impl RawFile for RemoteRaw {
    fn meta(&self) -> std::io::Result<Meta> {
        Ok(self.meta.clone())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        crate::fs::source_tree::read_clipped(self.obj.as_ref(), buf, offset)
    }

    fn lseek(&self, offset: i64, whence: i32) -> Result<i64, Error> {
        crate::fs::source_tree::lseek_whole(self.obj.len(), offset, whence)
    }
}

/// A sparse frame's files under an object-store prefix.
pub(super) struct RemoteFrame {
    pub path: PathBuf,
    pub remote: Remote,
    /// Its objects by name.
    pub objects: HashMap<String, Object>,
}

impl FrameFiles for RemoteFrame {
    fn path(&self) -> &Path {
        &self.path
    }

    fn entries(&self) -> u64 {
        self.objects.len() as u64
    }

    fn index(&self) -> blosc_decode::Result<Arc<dyn Source>> {
        let o = self
            .objects
            .get(SFRAME_INDEX)
            .ok_or_else(|| Error::not_found().in_source("chunks.b2frame is missing"))?;
        let src = self.remote.open(o);
        src.prefetch_open()?;
        Ok(src)
    }

    fn chunk(&self, name: &str) -> Arc<dyn Source> {
        match self.objects.get(name) {
            Some(o) => self.remote.open(o),
            None => Arc::new(Missing(name.to_string())),
        }
    }
}

/// A chunk object that is not there: its reads fail.
struct Missing(String);

impl Source for Missing {
    fn len(&self) -> u64 {
        0
    }

    fn read_exact_at(&self, _offset: u64, _buf: &mut [u8]) -> blosc_decode::Result<()> {
        Err(Error::io().in_source(format!("chunk file {} is missing", self.0)))
    }
}
