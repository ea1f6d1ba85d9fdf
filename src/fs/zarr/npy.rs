//! Each Zarr array as a `.npy` file beside its directory: `NAME.zarr/` (or
//! `NAME/`) holding `.zarray` or an array's `zarr.json` is also shown as
//! `NAME.npy`, unless the directory holds a real entry of that name. Its
//! bytes are read through [`bloscfs_zarr::ZarrArray`], chunks fetched
//! through the source tree; an array whose metadata is not understood is
//! not shown, with one log line saying why.

use super::super::source_tree::{lseek_whole, EntryKind, Meta, RawFile, SourceTree};
use crate::fs::Error;
use blosc_decode::io::{First, Source, Stamp};
use bloscfs_zarr::meta::MAX_META_BYTES;
use bloscfs_zarr::store::read_bounded;
use bloscfs_zarr::{ArrayMeta, ChunkStore, ZarrArray, ZARRAY, ZARR_JSON};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Arrays remembered, at most (the map is emptied past it).
const MAX_KEPT: usize = 4096;

/// What an array directory's metadata said: the array's metadata, or
/// `None` (not an array, or one not presented), at the metadata file's
/// stamp.
pub(super) type Kept = HashMap<PathBuf, (Stamp, Option<Arc<ArrayMeta>>)>;

/// An array's directory as a [`ChunkStore`]: its files through the tree.
pub(super) struct TreeStore {
    pub(super) tree: Arc<dyn SourceTree>,
    pub(super) dir: PathBuf,
}

impl ChunkStore for TreeStore {
    fn open(&self, key: &str, first: First) -> bloscfs_zarr::Result<Option<Arc<dyn Source>>> {
        self.tree.open_file(&self.dir.join(key), first)
    }
}

/// The name an array directory `name` is presented as: `.zarr` dropped,
/// `.npy` added.
pub(super) fn npy_name(name: &OsStr) -> OsString {
    let b = name.as_bytes();
    let mut out = b.strip_suffix(b".zarr").unwrap_or(b).to_vec();
    out.extend_from_slice(b".npy");
    OsString::from_vec(out)
}

/// The directories that `npy` (a `.npy` path) could stand for, in the
/// order they are tried.
pub(super) fn candidates(npy: &Path) -> Vec<PathBuf> {
    let (Some(parent), Some(name)) = (npy.parent(), npy.file_name()) else {
        return Vec::new();
    };
    match name.as_bytes().strip_suffix(b".npy") {
        Some(stem) if !stem.is_empty() => {
            let mut z = stem.to_vec();
            z.extend_from_slice(b".zarr");
            vec![
                parent.join(OsStr::from_bytes(&z)),
                parent.join(OsStr::from_bytes(stem)),
            ]
        }
        _ => Vec::new(),
    }
}

/// The metadata of the array at `dir` from its own metadata file (`None`:
/// not a presented array), read through `tree` once per version of it.
pub(super) fn own_meta(
    tree: &dyn SourceTree,
    kept: &mut Kept,
    dir: &Path,
) -> Option<Arc<ArrayMeta>> {
    let files = [(ZARRAY, true), (ZARR_JSON, false)];
    kept_doc(
        tree,
        kept,
        dir,
        files,
        MAX_META_BYTES,
        |text, v2| match text.and_then(|t| ArrayMeta::parse_node(&t, v2)) {
            Ok(m) => m.map(Arc::new),
            Err(e) => {
                not_presented(dir, &e.to_string());
                None
            }
        },
    )
}

/// What `parse` makes of the first of `files` (name, whether it is v2's)
/// that directory `dir` holds, read up to `max` bytes: once per version
/// of that file, `kept` (at most [`MAX_KEPT`] directories) remembering it.
pub(super) fn kept_doc<T: Clone>(
    tree: &dyn SourceTree,
    kept: &mut HashMap<PathBuf, (Stamp, Option<T>)>,
    dir: &Path,
    files: [(&str, bool); 2],
    max: u64,
    parse: impl FnOnce(blosc_decode::Result<Vec<u8>>, bool) -> Option<T>,
) -> Option<T> {
    let (file, v2) = files
        .into_iter()
        .find(|(f, _)| tree.stat(&dir.join(f)).is_ok_and(|m| m.is_file()))?;
    let path = dir.join(file);
    let md = tree.stat(&path).ok()?;
    if let Some((s, v)) = kept.get(dir) {
        if *s == md.stamp() {
            return v.clone();
        }
    }
    let text = tree
        .open_source(&path, &md)
        .and_then(|src| read_bounded(src.as_ref(), max, file));
    let v = parse(text, v2);
    if kept.len() >= MAX_KEPT {
        kept.clear();
    }
    kept.insert(dir.to_path_buf(), (md.stamp(), v.clone()));
    v
}

/// The log line of an array not presented.
pub(super) fn not_presented(dir: &Path, why: &str) {
    log::warn!("{}: Zarr array not presented as .npy: {why}", dir.display());
}

/// Bytes of the `.npy` of an array: header and values.
pub(super) fn npy_len(meta: &ArrayMeta) -> u64 {
    let data = meta.data_bytes();
    let header = blosc_decode::npy::npy_header(&meta.dtype.descr, false, &meta.shape, data);
    header.len() as u64 + data
}

/// The metadata of the `.npy` file of array directory `dir_md`, `len`
/// bytes long: the directory's owner and times, read permissions only, an
/// inode number of its own. Not pinned: chunks may change underneath.
pub(super) fn npy_meta(dir_md: &Meta, len: u64) -> Meta {
    let mut md = dir_md.clone();
    md.kind = EntryKind::File;
    md.mode = libc::S_IFREG | (dir_md.mode & 0o444);
    md.len = len;
    md.nlink = 1;
    md.blocks = len.div_ceil(512);
    md.ino = dir_md.ino ^ (0x7a61_7272_u64 << 32) ^ (1 << 62);
    md.pinned = false;
    md
}

/// The read errors logged (each once, not once per read of the chunk),
/// at most [`MAX_KEPT`] (the set is emptied past it).
pub(super) type Logged = Arc<parking_lot::Mutex<std::collections::HashSet<String>>>;

/// An open `.npy` of an array.
pub(super) struct NpyFile {
    pub(super) array: Arc<ZarrArray>,
    pub(super) meta: Meta,
    pub(super) path: PathBuf,
    pub(super) logged: Logged,
}

impl RawFile for NpyFile {
    fn meta(&self) -> std::io::Result<Meta> {
        Ok(self.meta.clone())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.array.read_npy_at(offset, buf).map_err(|e| {
            let line = format!("{}: {e}", self.path.display());
            let mut logged = self.logged.lock();
            if logged.len() >= MAX_KEPT {
                logged.clear();
            }
            if logged.insert(line.clone()) {
                log::warn!("{line}");
            }
            std::io::Error::from_raw_os_error(e.errno())
        })
    }

    fn lseek(&self, offset: i64, whence: i32) -> Result<i64, Error> {
        lseek_whole(self.array.npy_len(), offset, whence)
    }
}
