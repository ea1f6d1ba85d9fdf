//! The source tree as the presented tree sees it: list a directory, stat an
//! entry, read a link, probe and open an entry. [`super::Fs`] reaches the
//! source only through [`SourceTree`] (and a plain file through the
//! [`RawFile`] the tree opened); [`LocalTree`], a local directory, is its
//! implementation. What only a local tree has (sparse frames opened through
//! a directory descriptor, `O_NOFOLLOW` and fifo refusal, paths longer than
//! `PATH_MAX`) stays inside [`LocalTree`].

use super::Error;
use super::Statfs;
use crate::local::{self, longpath, FrameDir, SourceDir};
use crate::mount_table::FuseMounts;
use blosc_decode::container::{Container, Env};
use blosc_decode::detect::Probe;
use blosc_decode::io::{self, First, Source, Stamp};
use std::ffi::OsString;
use std::fs::{File, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

/// What a source entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File,
    Symlink,
    /// A device, socket or fifo: not presented.
    Other,
}

/// A time as seconds and nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Time {
    pub sec: i64,
    pub nsec: i64,
}

impl Time {
    fn ns(self) -> i128 {
        self.sec as i128 * 1_000_000_000 + self.nsec as i128
    }
}

/// The metadata of a source entry (not following a link).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub kind: EntryKind,
    pub len: u64,
    pub ino: u64,
    pub dev: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u64,
    /// 512-byte blocks used.
    pub blocks: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    /// Birth time, where the file system records one.
    pub born: Option<SystemTime>,
    /// Does its stamp name one version of the bytes, so that pages the
    /// kernel cached for an earlier open with the same stamp are still
    /// right? Not for a remote object without a strong ETag.
    pub pinned: bool,
}

impl Meta {
    pub fn is_dir(&self) -> bool {
        self.kind == EntryKind::Dir
    }

    pub fn is_file(&self) -> bool {
        self.kind == EntryKind::File
    }

    pub fn is_symlink(&self) -> bool {
        self.kind == EntryKind::Symlink
    }

    /// The identity of this version of the entry.
    pub fn stamp(&self) -> Stamp {
        Stamp {
            size: self.len,
            mtime_ns: self.mtime.ns(),
            ctime_ns: self.ctime.ns(),
            ino: self.ino,
            dev: self.dev,
        }
    }

    /// Is this the same entry as `other` (device and inode)?
    pub fn same_file(&self, other: &Meta) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }
}

impl From<&Metadata> for Meta {
    fn from(md: &Metadata) -> Meta {
        let ft = md.file_type();
        let kind = if ft.is_symlink() {
            EntryKind::Symlink
        } else if ft.is_dir() {
            EntryKind::Dir
        } else if ft.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        };
        let t = |sec, nsec| Time { sec, nsec };
        Meta {
            kind,
            len: md.len(),
            ino: md.ino(),
            dev: md.dev(),
            mode: md.mode(),
            uid: md.uid(),
            gid: md.gid(),
            nlink: md.nlink(),
            blocks: md.blocks(),
            atime: t(md.atime(), md.atime_nsec()),
            mtime: t(md.mtime(), md.mtime_nsec()),
            ctime: t(md.ctime(), md.ctime_nsec()),
            born: md.created().ok(),
            pinned: true,
        }
    }
}

/// A plain file of the source, open: read as its raw bytes.
pub trait RawFile: Send + Sync {
    /// Its metadata now.
    fn meta(&self) -> std::io::Result<Meta>;
    /// Read into `buf` from `offset`; fewer bytes at its end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;
    /// `lseek(2)` (`SEEK_DATA` and `SEEK_HOLE` included).
    fn lseek(&self, offset: i64, whence: i32) -> Result<i64, Error>;
}

impl RawFile for File {
    fn meta(&self) -> std::io::Result<Meta> {
        self.metadata().map(|m| Meta::from(&m))
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }

    fn lseek(&self, offset: i64, whence: i32) -> Result<i64, Error> {
        let fd = std::os::fd::AsRawFd::as_raw_fd(self);
        // SAFETY: `fd` is the open descriptor `self` owns.
        let r = unsafe { libc::lseek(fd, offset, whence) };
        if r < 0 {
            Err(std::io::Error::last_os_error().into())
        } else {
            Ok(r)
        }
    }
}

/// The source tree: everything the presented tree does to its source.
/// Paths are full paths under [`SourceTree::root`].
pub trait SourceTree: Send + Sync {
    /// The directory presented as the mount's root.
    fn root(&self) -> &Path;
    /// Is `path` an entry never to be looked at (nor anything below it)?
    fn hides(&self, path: &Path) -> bool;
    /// The names in directory `dir` (not `.` and `..`, nor names it
    /// [hides](SourceTree::hides)), unsorted.
    fn list(&self, dir: &Path) -> std::io::Result<Vec<OsString>>;
    /// The metadata of `path`, a link not followed.
    fn stat(&self, path: &Path) -> std::io::Result<Meta>;
    /// The metadata of `path`, links followed.
    fn stat_follow(&self, path: &Path) -> std::io::Result<Meta>;
    /// The target of the link at `path`.
    fn read_link(&self, path: &Path) -> std::io::Result<PathBuf>;
    /// Is the directory at `path` known to be no container (no sparse
    /// frame) without a look inside it?
    fn never_container(&self, _path: &Path) -> bool {
        false
    }
    /// Is the entry at `path`, described by `meta`, a container? `Ok(None)`:
    /// not one.
    fn probe(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Option<Probe>>;
    /// Open the container at `path` if it is still the entry `meta`
    /// describes (`Changed` if it was replaced; `Ok(None)`: not a
    /// container).
    fn open_container(
        &self,
        path: &Path,
        meta: &Meta,
        env: &Env,
    ) -> blosc_decode::Result<Option<Container>>;
    /// Open the regular file at `path`, if it is still the entry `meta`
    /// describes, as a source of its bytes (a store's archive).
    fn open_source(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Arc<dyn Source>>;
    /// Open the regular file at `path` for reading as raw bytes, with its
    /// metadata as opened (the caller checks it is the file it looked up).
    fn open_plain(&self, path: &Path) -> std::io::Result<(Box<dyn RawFile>, Meta)>;
    /// A directory container's permission bits (no wider than those of
    /// every file it reads) and blocks used, or `(0, 0)` when the directory
    /// at `path` is not the one `meta` describes.
    fn dir_container_access(&self, path: &Path, meta: &Meta) -> (u16, u64);
    /// Statistics of the storage holding the tree (nothing free: the mount
    /// is read-only).
    fn statfs(&self) -> std::io::Result<Statfs>;
    /// How many threads stat and probe the `entries` of a listing: a local
    /// disk wants a few, a remote store (a round trip per probe) many.
    fn listing_workers(&self, entries: usize) -> usize {
        entries.div_ceil(256).clamp(1, 8)
    }
    /// The file at `path` for positional reads (`None`: there is none),
    /// asked of the source directly where it can (a remote object by its
    /// key: no listing of its directory, and what its reader reads `first`
    /// in the same request). Zarr chunks are opened so.
    fn open_file(
        &self,
        path: &Path,
        _first: First,
    ) -> blosc_decode::Result<Option<Arc<dyn Source>>> {
        open_by_stat(self, path)
    }
    /// Extended attributes of a plain file `path` (name, value).
    fn xattrs(&self, _path: &Path) -> Vec<(String, Vec<u8>)> {
        Vec::new()
    }
    /// Counters of the tree's own work (a remote store's requests), as
    /// `user.bloscfs.stats` shows them.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// [`SourceTree::open_file`] by a `stat` of `path` and an open of what it
/// found.
pub(super) fn open_by_stat<T: SourceTree + ?Sized>(
    tree: &T,
    path: &Path,
) -> blosc_decode::Result<Option<Arc<dyn Source>>> {
    let Some(md) = stat_file(tree, path)? else {
        return Ok(None);
    };
    tree.open_source(path, &md)
        .map(Some)
        .map_err(|e| e.in_file(path))
}

/// What a `stat` of `path` says, if it is a file.
pub(super) fn stat_file<T: SourceTree + ?Sized>(
    tree: &T,
    path: &Path,
) -> blosc_decode::Result<Option<Meta>> {
    match tree.stat(path) {
        Ok(md) if md.is_file() => Ok(Some(md)),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(blosc_decode::Error::from(e).in_file(path)),
    }
}

/// A local directory as the source tree.
pub struct LocalTree {
    root: PathBuf,
    /// FUSE mounts inside the source: never looked into ([`crate::mount_table`]).
    fuse_mounts: FuseMounts,
}

impl LocalTree {
    /// The tree under `root` (a canonical path to a directory).
    pub fn new(root: PathBuf) -> LocalTree {
        LocalTree {
            fuse_mounts: FuseMounts::new(&root),
            root,
        }
    }
}

/// The error of an entry replaced since it was looked up.
fn swapped(path: &Path) -> blosc_decode::Error {
    blosc_decode::Error::new(
        blosc_decode::ErrorKind::Changed,
        "replaced since it was looked up: not opened",
    )
    .in_file(path)
}

/// Read `src` into `buf` from `offset` as a file is read: fewer bytes at
/// its end, none past it.
pub(super) fn read_clipped(
    src: &dyn Source,
    buf: &mut [u8],
    offset: u64,
) -> std::io::Result<usize> {
    let len = src.len();
    if offset >= len {
        return Ok(0);
    }
    let n = ((len - offset) as usize).min(buf.len());
    src.read_exact_at(offset, &mut buf[..n])
        .map_err(|e| std::io::Error::from_raw_os_error(e.errno()))?;
    Ok(n)
}

/// `lseek(2)` in a file of `len` bytes without holes.
pub(super) fn lseek_whole(len: u64, offset: i64, whence: i32) -> Result<i64, Error> {
    let len = len as i64;
    match whence {
        libc::SEEK_DATA if offset < len && offset >= 0 => Ok(offset),
        libc::SEEK_HOLE if offset < len && offset >= 0 => Ok(len),
        libc::SEEK_DATA | libc::SEEK_HOLE => Err(Error::past_end()),
        libc::SEEK_SET if offset >= 0 => Ok(offset),
        libc::SEEK_END => len
            .checked_add(offset)
            .filter(|&o| o >= 0)
            .ok_or_else(Error::invalid),
        _ => Err(Error::invalid()),
    }
}

/// Is the directory `d` the entry `meta` describes?
fn dir_is(d: &SourceDir, meta: &Meta) -> bool {
    Meta::from(d.metadata()).same_file(meta)
}

impl SourceTree for LocalTree {
    fn root(&self) -> &Path {
        &self.root
    }

    fn hides(&self, path: &Path) -> bool {
        self.fuse_mounts.blocks(path)
    }

    fn list(&self, dir: &Path) -> std::io::Result<Vec<OsString>> {
        let mounts = self.fuse_mounts.inside();
        let mut found = Vec::new();
        for name in longpath::read_dir_names(dir)? {
            let name = name?;
            // A FUSE mount point is not stat'ed, let alone listed.
            if !mounts.iter().any(|m| dir.join(&name).starts_with(m)) {
                found.push(name);
            }
        }
        Ok(found)
    }

    fn stat(&self, path: &Path) -> std::io::Result<Meta> {
        longpath::symlink_metadata(path).map(|m| Meta::from(&m))
    }

    fn stat_follow(&self, path: &Path) -> std::io::Result<Meta> {
        longpath::metadata(path).map(|m| Meta::from(&m))
    }

    fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
        longpath::read_link(path)
    }

    fn probe(&self, path: &Path, _meta: &Meta) -> blosc_decode::Result<Option<Probe>> {
        local::probe_path(path)
    }

    fn open_container(
        &self,
        path: &Path,
        meta: &Meta,
        env: &Env,
    ) -> blosc_decode::Result<Option<Container>> {
        if meta.is_dir() {
            if !local::is_sframe_dir(path) {
                return Ok(None);
            }
            let dir = SourceDir::open(path, false)
                .map_err(|e| blosc_decode::Error::from(e).in_file(path))?;
            if !dir_is(&dir, meta) {
                return Err(swapped(path));
            }
            return blosc_decode::open::open_sframe(&FrameDir(Arc::new(dir)), env);
        }
        blosc_decode::open::open_source(self.open_source(path, meta)?, path, env)
    }

    fn open_source(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Arc<dyn Source>> {
        let (file, fmd) =
            local::open_regular(path).map_err(|e| blosc_decode::Error::from(e).in_file(path))?;
        if !Meta::from(&fmd).same_file(meta) {
            return Err(swapped(path));
        }
        let file = io::FileSource::opened(file, &fmd, path);
        Ok(Arc::new(local::DirectFile::new(file)))
    }

    fn open_plain(&self, path: &Path) -> std::io::Result<(Box<dyn RawFile>, Meta)> {
        let (f, m) = local::open_regular(path)?;
        Ok((Box::new(f), Meta::from(&m)))
    }

    fn dir_container_access(&self, path: &Path, meta: &Meta) -> (u16, u64) {
        match SourceDir::open(path, false) {
            Ok(d) if dir_is(&d, meta) => d.frame_access(),
            _ => (0, 0),
        }
    }

    fn statfs(&self) -> std::io::Result<Statfs> {
        let c = std::ffi::CString::new(self.root.as_os_str().as_bytes())?;
        // SAFETY: statvfs is a plain C struct of integers, for which all
        // zero bytes is a valid value.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a valid NUL-terminated path and `s` a valid out-pointer.
        if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Statfs {
            blocks: s.f_blocks,
            bfree: 0,
            bavail: 0,
            files: s.f_files,
            ffree: 0,
            bsize: s.f_bsize as u32,
            namelen: s.f_namemax as u32,
            frsize: s.f_frsize as u32,
        })
    }
}
