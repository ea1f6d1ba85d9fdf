//! The presented tree works through any `SourceTree`: a tree wrapping the
//! local one that counts what the presented tree asks of its source.

use crate::common;
use blosc_decode::container::{Container, Env};
use blosc_decode::detect::Probe;
use bloscfs::fs::{Filled, Fs, FsOptions, LocalTree, Meta, RawFile, SourceTree, Statfs, ROOT_INO};
use common::*;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A local tree, with a count of each call per (method, path).
pub(crate) struct Counting {
    pub(crate) inner: LocalTree,
    pub(crate) calls: Mutex<HashMap<(&'static str, PathBuf), u32>>,
}

impl Counting {
    fn note(&self, what: &'static str, p: &Path) {
        *self
            .calls
            .lock()
            .entry((what, p.to_path_buf()))
            .or_default() += 1;
    }

    fn count(&self, what: &'static str, p: &Path) -> u32 {
        let calls = self.calls.lock();
        calls.get(&(what, p.to_path_buf())).copied().unwrap_or(0)
    }

    fn total(&self, what: &'static str) -> u32 {
        let calls = self.calls.lock();
        calls
            .iter()
            .filter(|(k, _)| k.0 == what)
            .map(|(_, n)| n)
            .sum()
    }
}

impl SourceTree for Counting {
    fn root(&self) -> &Path {
        self.inner.root()
    }
    fn hides(&self, path: &Path) -> bool {
        self.inner.hides(path)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<OsString>> {
        self.note("list", dir);
        self.inner.list(dir)
    }
    fn stat(&self, path: &Path) -> std::io::Result<Meta> {
        self.note("stat", path);
        self.inner.stat(path)
    }
    fn stat_follow(&self, path: &Path) -> std::io::Result<Meta> {
        self.note("stat_follow", path);
        self.inner.stat_follow(path)
    }
    fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.note("read_link", path);
        self.inner.read_link(path)
    }
    fn probe(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Option<Probe>> {
        self.note("probe", path);
        self.inner.probe(path, meta)
    }
    fn open_container(
        &self,
        path: &Path,
        meta: &Meta,
        env: &Env,
    ) -> blosc_decode::Result<Option<Container>> {
        self.note("open_container", path);
        self.inner.open_container(path, meta, env)
    }
    fn open_plain(&self, path: &Path) -> std::io::Result<(Box<dyn RawFile>, Meta)> {
        self.note("open_plain", path);
        self.inner.open_plain(path)
    }
    fn open_source(
        &self,
        path: &Path,
        meta: &Meta,
    ) -> blosc_decode::Result<Arc<dyn blosc_decode::io::Source>> {
        self.note("open_source", path);
        self.inner.open_source(path, meta)
    }
    fn dir_container_access(&self, path: &Path, meta: &Meta) -> (u16, u64) {
        self.inner.dir_container_access(path, meta)
    }
    fn statfs(&self) -> std::io::Result<Statfs> {
        self.inner.statfs()
    }
}

fn counted(n_plain: usize) -> (tempfile::TempDir, Arc<Counting>, Fs) {
    let d = tempfile::tempdir().unwrap();
    let src = source_with_fixtures(d.path());
    for i in 0..n_plain {
        std::fs::write(src.join(format!("plain{i:03}.txt")), vec![b'x'; 200]).unwrap();
    }
    let tree = Arc::new(Counting {
        inner: LocalTree::new(src.canonicalize().unwrap()),
        calls: Mutex::default(),
    });
    let fs = Fs::with_tree(tree.clone(), &FsOptions::default()).unwrap();
    (d, tree, fs)
}

#[test]
fn a_listing_lists_once_and_stats_and_probes_each_entry_once() {
    let (_d, tree, fs) = counted(40);
    let root = tree.root().to_path_buf();
    let first = names(&fs, ROOT_INO);
    assert_eq!(first.len(), 2 + 3 + 40, "{first:?}");
    assert!(first.contains(&"series".to_string()), "{first:?}");
    assert!(first.contains(&"grid.npy".to_string()), "{first:?}");
    assert_eq!(tree.count("list", &root), 1);
    for e in std::fs::read_dir(&root).unwrap() {
        let p = e.unwrap().path();
        assert_eq!(tree.count("stat", &p), 1, "{}", p.display());
        assert!(tree.count("probe", &p) <= 1, "{}", p.display());
    }
    for c in ["series.b2frame", "grid.b2nd"] {
        assert_eq!(tree.count("probe", &root.join(c)), 1, "{c}");
    }
    let probed = tree.total("probe");
    // Within the listing's lifetime the source directory is not read again.
    assert_eq!(names(&fs, ROOT_INO), first);
    assert_eq!(tree.count("list", &root), 1);
    assert_eq!(tree.total("probe"), probed);
}

#[test]
fn reads_go_through_the_tree_and_open_a_container_once() {
    let (_d, tree, fs) = counted(0);
    let root = tree.root().to_path_buf();
    let series = fs.lookup(ROOT_INO, "series".as_ref()).unwrap();
    let want = blosc_decode::open_path(&root.join("series.b2frame"))
        .unwrap()
        .unwrap();
    let mut expect = vec![0u8; want.len() as usize];
    let got = want.read_at(0, &mut expect).unwrap();
    assert_eq!(got as u64, series.size);
    for _ in 0..2 {
        let (fh, _) = fs.open(series.ino, false).unwrap();
        let mut buf = Vec::new();
        let filled = fs.read_into(fh, 0, series.size as u32, &mut buf).unwrap();
        assert_eq!(filled, Filled::Buf);
        assert_eq!(buf, expect);
        fs.release(fh);
    }
    assert_eq!(
        tree.count("open_container", &root.join("series.b2frame")),
        1
    );
    let notes = fs.lookup(ROOT_INO, "notes.txt".as_ref()).unwrap();
    let (fh, _) = fs.open(notes.ino, false).unwrap();
    assert_eq!(fs.read(fh, 0, 100).unwrap(), b"plain text\n");
    assert_eq!(tree.count("open_plain", &root.join("notes.txt")), 1);
}
