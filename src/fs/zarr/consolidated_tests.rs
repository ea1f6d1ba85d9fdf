//! A group with consolidated metadata presents its arrays without a look
//! inside their directories: the paths the source tree is asked about
//! are counted by a tree over the real local one that records them.

use super::super::source_tree::{LocalTree, Meta, RawFile, SourceTree};
use super::super::Statfs;
use super::ZarrTree;
use blosc_decode::container::{Container, Env};
use blosc_decode::detect::Probe;
use blosc_decode::io::Source;
use parking_lot::Mutex;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The local tree, recording each path it is asked about.
struct Recording {
    inner: LocalTree,
    asked: Mutex<Vec<PathBuf>>,
}

impl Recording {
    fn note(&self, p: &Path) {
        self.asked.lock().push(p.to_path_buf());
    }
}

impl SourceTree for Recording {
    fn root(&self) -> &Path {
        self.inner.root()
    }
    fn hides(&self, path: &Path) -> bool {
        self.inner.hides(path)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<OsString>> {
        self.note(dir);
        self.inner.list(dir)
    }
    fn stat(&self, path: &Path) -> std::io::Result<Meta> {
        self.note(path);
        self.inner.stat(path)
    }
    fn stat_follow(&self, path: &Path) -> std::io::Result<Meta> {
        self.note(path);
        self.inner.stat_follow(path)
    }
    fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.inner.read_link(path)
    }
    fn probe(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Option<Probe>> {
        self.inner.probe(path, meta)
    }
    fn open_container(
        &self,
        path: &Path,
        meta: &Meta,
        env: &Env,
    ) -> blosc_decode::Result<Option<Container>> {
        self.inner.open_container(path, meta, env)
    }
    fn open_source(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Arc<dyn Source>> {
        self.note(path);
        self.inner.open_source(path, meta)
    }
    fn open_plain(&self, path: &Path) -> std::io::Result<(Box<dyn RawFile>, Meta)> {
        self.note(path);
        self.inner.open_plain(path)
    }
    fn dir_container_access(&self, path: &Path, meta: &Meta) -> (u16, u64) {
        self.inner.dir_container_access(path, meta)
    }
    fn statfs(&self) -> std::io::Result<Statfs> {
        self.inner.statfs()
    }
}

/// The group `group` of writer `w`'s fixtures (copied, so that
/// `.zmetadata` can be taken away), its array directories, and the trees.
fn presented(w: &str, group: &str, arrays: &[&str], consolidated: bool) -> Vec<PathBuf> {
    let tmp = tempfile::tempdir().unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/zarr")
        .join(w)
        .join("stores")
        .join(group);
    let root = tmp.path().canonicalize().unwrap();
    copy(&from, &root.join(group));
    let g = root.join(group);
    if !consolidated {
        std::fs::remove_file(g.join(".zmetadata")).ok();
        let meta = g.join("zarr.json");
        if let Ok(text) = std::fs::read_to_string(&meta) {
            let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
            doc.as_object_mut().unwrap().remove("consolidated_metadata");
            std::fs::write(&meta, doc.to_string()).unwrap();
        }
    }
    let rec = Arc::new(Recording {
        inner: LocalTree::new(root.clone()),
        asked: Mutex::new(Vec::new()),
    });
    let tree = ZarrTree::new(rec.clone());
    // List every group, look up every array's `.npy`.
    for a in arrays {
        let dir = g.join(a);
        let parent = dir.parent().unwrap();
        let names = tree.list(parent).unwrap();
        let npy = format!("{}.npy", dir.file_name().unwrap().to_str().unwrap());
        assert!(names.iter().any(|n| n == npy.as_str()), "{a}: {names:?}");
        assert!(tree.stat(&parent.join(&npy)).unwrap().len > 128);
    }
    // The paths asked about inside an array's directory.
    let asked = rec.asked.lock();
    asked
        .iter()
        .filter(|p| {
            arrays
                .iter()
                .any(|a| p.starts_with(g.join(a)) && **p != g.join(a))
        })
        .cloned()
        .collect()
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let t = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

#[test]
fn consolidated_groups_present_arrays_without_looking_inside_them() {
    for (w, arrays) in [
        ("z2-2.18.7", ["a", "sub/b", "sub/c"]),
        ("z3-3.1.6", ["x", "sub/y", "sub/z"]),
    ] {
        let inside = presented(w, "group.zarr", &arrays, true);
        assert!(inside.is_empty(), "{w}: {inside:?}");
        // Without consolidated metadata each array's own file is read.
        let inside = presented(w, "group.zarr", &arrays, false);
        assert!(inside.len() >= 3, "{w}: {inside:?}");
    }
}
