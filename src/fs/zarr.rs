//! Zarr stores: [`ZarrTree`] wraps the source tree so that every file
//! inside a Zarr store (below a directory holding `.zarray`, `.zgroup`,
//! `.zattrs`, `.zmetadata` or `zarr.json`, at any depth) passes through as
//! its raw bytes: a store's chunks are Blosc (or zstd...) chunks that
//! zarr-python reads itself, and decoding them in place would break it.

use super::source_tree::{Meta, RawFile, SourceTree};
use super::Statfs;
use blosc_decode::container::{Container, Env};
use blosc_decode::detect::Probe;
use blosc_decode::io::{Source, Stamp};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The names whose presence makes a directory part of a Zarr store.
const MARKERS: [&str; 5] = [".zarray", ".zgroup", ".zattrs", ".zmetadata", "zarr.json"];

/// Directories remembered, at most (the map is emptied past it).
const MAX_KEPT: usize = 1 << 16;

/// The source tree with Zarr stores passed through.
pub struct ZarrTree {
    inner: Arc<dyn SourceTree>,
    /// Whether each directory looked at holds a marker, with the
    /// directory's stamp when it was looked at.
    marked: Mutex<HashMap<PathBuf, (Stamp, bool)>>,
}

impl ZarrTree {
    pub fn new(inner: Arc<dyn SourceTree>) -> ZarrTree {
        ZarrTree {
            inner,
            marked: Mutex::new(HashMap::new()),
        }
    }

    /// Does directory `dir` hold a Zarr marker? Remembered while the
    /// directory's metadata is unchanged (a name added changes it).
    fn is_marked(&self, dir: &Path) -> bool {
        let Ok(md) = self.inner.stat(dir).map(|m| m.stamp()) else {
            return false;
        };
        if let Some((m, yes)) = self.marked.lock().get(dir) {
            if *m == md {
                return *yes;
            }
        }
        let yes = MARKERS
            .iter()
            .any(|n| self.inner.stat(&dir.join(n)).is_ok_and(|m| m.is_file()));
        let mut kept = self.marked.lock();
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert(dir.to_path_buf(), (md, yes));
        yes
    }

    /// Is `path` inside a Zarr store (one of its directories, below the
    /// tree's root, holds a marker)? The entry itself is not looked at: a
    /// store's own directory is not inside it.
    fn in_store(&self, path: &Path) -> bool {
        let root = self.inner.root();
        path.ancestors()
            .skip(1)
            .take_while(|d| d.starts_with(root))
            .any(|d| self.is_marked(d))
    }
}

impl SourceTree for ZarrTree {
    fn root(&self) -> &Path {
        self.inner.root()
    }

    fn hides(&self, path: &Path) -> bool {
        self.inner.hides(path)
    }

    fn list(&self, dir: &Path) -> std::io::Result<Vec<OsString>> {
        self.inner.list(dir)
    }

    fn stat(&self, path: &Path) -> std::io::Result<Meta> {
        self.inner.stat(path)
    }

    fn stat_follow(&self, path: &Path) -> std::io::Result<Meta> {
        self.inner.stat_follow(path)
    }

    fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.inner.read_link(path)
    }

    fn probe(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Option<Probe>> {
        if self.in_store(path) {
            return Ok(None);
        }
        self.inner.probe(path, meta)
    }

    fn open_container(
        &self,
        path: &Path,
        meta: &Meta,
        env: &Env,
    ) -> blosc_decode::Result<Option<Container>> {
        if self.in_store(path) {
            return Ok(None);
        }
        self.inner.open_container(path, meta, env)
    }

    fn open_source(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Arc<dyn Source>> {
        self.inner.open_source(path, meta)
    }

    fn open_plain(&self, path: &Path) -> std::io::Result<(Box<dyn RawFile>, Meta)> {
        self.inner.open_plain(path)
    }

    fn dir_container_access(&self, path: &Path, meta: &Meta) -> (u16, u64) {
        self.inner.dir_container_access(path, meta)
    }

    fn statfs(&self) -> std::io::Result<Statfs> {
        self.inner.statfs()
    }

    fn listing_workers(&self, entries: usize) -> usize {
        self.inner.listing_workers(entries)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.inner.counters()
    }
}
