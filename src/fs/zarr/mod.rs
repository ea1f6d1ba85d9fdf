//! Zarr stores: [`ZarrTree`] wraps the source tree so that every file
//! inside a Zarr store (below a directory holding `.zarray`, `.zgroup`,
//! `.zattrs`, `.zmetadata` or `zarr.json`, at any depth) passes through as
//! its raw bytes: a store's chunks are Blosc (or zstd...) chunks that
//! zarr-python reads itself, and decoding them in place would break it.
//! Each array is also shown as a `.npy` file beside its directory
//! ([`npy`]).

mod attrs;
mod consolidated;
mod npy;

use super::source_tree::{Meta, RawFile, SourceTree};
use super::wrapped::WrappedTree;
use blosc_decode::container::{Container, Env};
use blosc_decode::detect::Probe;
use blosc_decode::io::Stamp;
use bloscfs_zarr::attrs::Attrs;
use bloscfs_zarr::consolidated::Node;
use bloscfs_zarr::{ArrayMeta, ZarrArray};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

/// The names whose presence makes a directory part of a Zarr store.
const MARKERS: [&str; 5] = [".zarray", ".zgroup", ".zattrs", ".zmetadata", "zarr.json"];

/// Directories remembered, at most (the map is emptied past it).
const MAX_KEPT: usize = 1 << 16;

/// Arrays of open handles remembered before those no handle reads any
/// more are let go.
const MAX_OPEN_ARRAYS: usize = 1024;

/// An array open handles read, with the metadata it was made from.
type OpenArray = (Arc<ArrayMeta>, Weak<ZarrArray>);

/// The source tree with Zarr stores passed through.
pub struct ZarrTree {
    inner: Arc<dyn SourceTree>,
    /// The daemon's cache and counters, which arrays read through.
    env: Env,
    /// Whether each directory looked at holds a marker, with the
    /// directory's stamp when it was looked at.
    marked: Mutex<HashMap<PathBuf, (Stamp, bool)>>,
    /// Array directories looked at.
    arrays: Mutex<npy::Kept>,
    /// Groups looked at for consolidated metadata.
    groups: Mutex<consolidated::Kept>,
    /// Array directories looked at for attributes.
    attrs: Mutex<attrs::Kept>,
    /// Read errors of `.npy` files logged: one line per failed chunk.
    logged: npy::Logged,
    /// The arrays open handles read, by directory, with the metadata
    /// each was made from: handles open at once share one array, so
    /// that what one decodes the others find.
    open: Mutex<HashMap<PathBuf, OpenArray>>,
}

impl ZarrTree {
    pub fn new(inner: Arc<dyn SourceTree>, env: Env) -> ZarrTree {
        ZarrTree {
            inner,
            env,
            marked: Mutex::new(HashMap::new()),
            arrays: Mutex::new(HashMap::new()),
            groups: Mutex::new(HashMap::new()),
            attrs: Mutex::new(HashMap::new()),
            logged: Default::default(),
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The array at `dir` that `meta` describes: the one an open handle
    /// reads already (made from the same metadata), else a new one.
    fn shared_array(&self, dir: PathBuf, meta: Arc<ArrayMeta>) -> Arc<ZarrArray> {
        let mut open = self.open.lock();
        if let Some((m, a)) = open.get(&dir) {
            if let Some(a) = a.upgrade().filter(|_| Arc::ptr_eq(m, &meta)) {
                return a;
            }
        }
        if open.len() >= MAX_OPEN_ARRAYS {
            open.retain(|_, (_, a)| a.strong_count() > 0);
        }
        let store = npy::TreeStore {
            tree: self.inner.clone(),
            dir: dir.clone(),
        };
        let a = ZarrArray::with_env(ArrayMeta::clone(&meta), Arc::new(store), self.env.clone());
        let a = Arc::new(a);
        open.insert(dir, (meta, Arc::downgrade(&a)));
        a
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

    /// Is `path` a chunk (or shard) of a Zarr store: named as a chunk key
    /// ends (`0.1.2`, `c.0.1`, or `2` under `c/` or a `/`-separated v2
    /// key) and inside a store? Only such files would be taken for Blosc
    /// containers: the others of a store are its JSON. Asking the name
    /// first spares every other file the look at its directories, which
    /// on a remote store costs a listing each.
    fn is_chunk(&self, path: &Path) -> bool {
        path.file_name()
            .is_some_and(|n| chunk_key_like(n.as_encoded_bytes()))
            && self.in_store(path)
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

impl ZarrTree {
    /// The array directory a `.npy` path that is not in the source stands
    /// for, with the metadata of that `.npy`.
    fn array_of(&self, path: &Path) -> Option<(PathBuf, Meta)> {
        npy::candidates(path)
            .into_iter()
            .find_map(|dir| self.array_at(&dir).map(|md| (dir, md)))
    }

    /// The metadata of the `.npy` of the array at `dir`, if it is one.
    fn array_at(&self, dir: &Path) -> Option<Meta> {
        let md = self.inner.stat(dir).ok().filter(Meta::is_dir)?;
        let meta = self.array_meta(dir)?;
        Some(npy::npy_meta(&md, npy::npy_len(&meta)))
    }

    /// The consolidated metadata that describes directory `dir`, with
    /// `dir`'s path relative to its group: that of the nearest group above
    /// `dir` that has some and knows `dir`.
    fn described(&self, dir: &Path) -> Option<(Arc<consolidated::Group>, PathBuf)> {
        let root = self.inner.root();
        for group in dir.ancestors().skip(1).take_while(|d| d.starts_with(root)) {
            if !self.is_marked(group) {
                return None;
            }
            let tree = self.inner.as_ref();
            let Some(g) = consolidated::nodes_at(tree, &mut self.groups.lock(), group) else {
                continue;
            };
            let rel = dir.strip_prefix(group).ok()?.to_path_buf();
            return g.nodes.contains_key(&rel).then_some((g, rel));
        }
        None
    }

    /// The metadata of the array at directory `dir`: from the consolidated
    /// metadata that describes it, else from `dir`'s own metadata file.
    fn array_meta(&self, dir: &Path) -> Option<Arc<ArrayMeta>> {
        match self.described(dir) {
            Some((g, rel)) => match g.nodes.get(&rel) {
                Some(Node::Array(m)) => m.clone().ok(),
                _ => None,
            },
            None => npy::own_meta(self.inner.as_ref(), &mut self.arrays.lock(), dir),
        }
    }

    /// The attributes of the array at directory `dir`, from where its
    /// metadata comes from.
    fn array_attrs(&self, dir: &Path) -> Option<Arc<Attrs>> {
        match self.described(dir) {
            Some((g, rel)) => g.attrs.get(&rel).and_then(|a| a.clone().ok()),
            None => attrs::own_attrs(self.inner.as_ref(), &mut self.attrs.lock(), dir),
        }
    }

    /// `path`'s metadata from the source, else as an array's `.npy`.
    fn stat_with(
        &self,
        path: &Path,
        stat: impl Fn(&Path) -> std::io::Result<Meta>,
    ) -> std::io::Result<Meta> {
        match stat(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match self.array_of(path) {
                Some((_, md)) => Ok(md),
                None => Err(e),
            },
            r => r,
        }
    }

    /// The `.npy` names of the arrays among `names` (entries of `dir`),
    /// but none a real entry has. `NAME.zarr` takes `NAME.npy` before
    /// `NAME`, as [`ZarrTree::array_of`] looks them up. Outside a store only
    /// `NAME.zarr` entries are looked at: a listing costs no more than one
    /// stat per entry unless it is a Zarr store's.
    fn npy_names(&self, dir: &Path, names: &[OsString]) -> Vec<OsString> {
        let taken: HashSet<&OsString> = names.iter().collect();
        let store = self.is_marked(dir) || self.in_store(dir);
        let mut added = Vec::new();
        for n in names {
            if !store && !n.as_encoded_bytes().ends_with(b".zarr") {
                continue;
            }
            let shown = npy::npy_name(n);
            let mut zarr = n.clone();
            zarr.push(".zarr");
            if taken.contains(&shown) || taken.contains(&zarr) {
                continue;
            }
            if self.array_at(&dir.join(n)).is_some() {
                added.push(shown);
            }
        }
        added
    }
}

impl WrappedTree for ZarrTree {
    fn inner(&self) -> &dyn SourceTree {
        &*self.inner
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<OsString>> {
        let mut names = self.inner.list(dir)?;
        let more = self.npy_names(dir, &names);
        names.extend(more);
        Ok(names)
    }

    fn stat(&self, path: &Path) -> std::io::Result<Meta> {
        self.stat_with(path, |p| self.inner.stat(p))
    }

    fn stat_follow(&self, path: &Path) -> std::io::Result<Meta> {
        self.stat_with(path, |p| self.inner.stat_follow(p))
    }

    /// A directory inside a Zarr store holds Zarr's files, never a sparse
    /// frame: asking it for `chunks.b2frame` would cost a listing of every
    /// array directory of a remote store.
    fn never_container(&self, path: &Path) -> bool {
        self.in_store(path) || self.inner.never_container(path)
    }

    fn probe(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Option<Probe>> {
        // A `.npy` of an array is not in the source (and, unlike a local
        // file, not pinned: its stamp is its directory's).
        let shown = !meta.pinned && path.extension().is_some_and(|e| e == "npy");
        if self.is_chunk(path) || shown && self.inner.stat(path).is_err() {
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
        if self.is_chunk(path) {
            return Ok(None);
        }
        self.inner.open_container(path, meta, env)
    }

    fn open_plain(&self, path: &Path) -> std::io::Result<(Box<dyn RawFile>, Meta)> {
        match self.inner.open_plain(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            r => return r,
        }
        let (dir, meta) = self
            .array_of(path)
            .ok_or_else(|| std::io::Error::from(crate::fs::Error::not_found()))?;
        let array_meta = self
            .array_meta(&dir)
            .ok_or_else(|| std::io::Error::from(crate::fs::Error::not_found()))?;
        let array = self.shared_array(dir, array_meta);
        let file = npy::NpyFile {
            array,
            meta: meta.clone(),
            path: path.to_path_buf(),
            logged: self.logged.clone(),
        };
        Ok((Box::new(file), meta))
    }

    /// An array's `.npy` has its attributes as `user.zarr.*`.
    fn xattrs(&self, path: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out = self.inner.xattrs(path);
        let npy = path.extension().is_some_and(|e| e == "npy");
        if npy && self.inner.stat(path).is_err() {
            if let Some(a) = self.array_of(path).and_then(|(d, _)| self.array_attrs(&d)) {
                out.extend(a.pairs.iter().cloned());
            }
        }
        out
    }
}

/// Is `name` what a Zarr chunk key ends with: numbers joined by `.`,
/// perhaps after `c.` (v3's default encoding with `.`)?
fn chunk_key_like(name: &[u8]) -> bool {
    let digits = name.strip_prefix(b"c.").unwrap_or(name);
    !digits.is_empty()
        && digits
            .split(|&b| b == b'.')
            .all(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit))
}

#[cfg(test)]
mod tests {
    use super::chunk_key_like;

    #[test]
    fn chunk_keys_are_told_by_their_names() {
        for k in ["0", "0.0", "12.3.4", "c.0.1"] {
            assert!(chunk_key_like(k.as_bytes()), "{k}");
        }
        for k in [
            "", "c", ".0", "0.", "0..1", "m.b2nd", "c.x", "1e5", ".zarray",
        ] {
            assert!(!chunk_key_like(k.as_bytes()), "{k}");
        }
    }
}
