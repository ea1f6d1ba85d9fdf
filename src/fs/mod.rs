//! The presented tree: inodes, names, attributes and reads, as plain Rust
//! results (an [`Error`] carrying the errno on failure: `error.rs` is where
//! errors become errno). `crate::fuse` adapts this to the kernel; the logic
//! here is tested without a mount.
//!
//! Directories mirror SOURCE. Every container (detected by content) is a
//! regular read-only file of its uncompressed bytes, named after its source
//! with one known suffix removed (`.b2nd` arrays become `.npy`); a name that
//! would collide keeps its source name. A `.b2z` store is a directory of its
//! members ([`stores`]). Every file inside a Zarr store passes through
//! ([`zarr`]). Everything else passes through.

pub use crate::config::FsOptions;
use crate::local::Caller;
use crate::names;
use blosc_decode::cache::Stats;
use blosc_decode::container::{Container, Env, View};
use blosc_decode::detect::{self, Probe};
use blosc_decode::io::{self, Stamp};
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod containers;
mod dirs;
mod error;
mod handle;
mod inodes;
mod links;
mod listing;
mod lookup;
mod open;
mod probe;
mod read;
mod remote_tree;
mod source_tree;
mod stores;
mod wrapped;
mod xattr;
mod zarr;

use containers::OpenContainers;
use dirs::DirHandle;
pub use dirs::DirItem;
pub use error::{Error, ToErrno};
use handle::{ContainerHandle, Handle, Handles, PlainHandle};
use inodes::Inodes;
use listing::{DirListing, Listings};
use probe::Probes;
pub use remote_tree::RemoteTree;
pub use source_tree::{EntryKind, LocalTree, Meta, RawFile, SourceTree, Time};
pub use stores::{table_cli, StoreTree};
pub use xattr::Statfs;
pub use zarr::ZarrTree;

pub const ROOT_INO: u64 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
}

/// Attributes of a presented node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    pub size: u64,
    /// 512-byte blocks used on disk by the source.
    pub blocks: u64,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub blksize: u32,
}

/// What a source entry is shown as (a directory, a link, a plain file or a
/// container).
#[derive(Debug, Clone)]
enum Shown {
    Dir,
    Symlink,
    /// A plain file passed through.
    Plain,
    /// A container (file, or sparse-frame directory).
    Container(Probe),
}

impl Shown {
    fn is_container(&self) -> bool {
        matches!(self, Shown::Container(_))
    }
}

/// Most entries kept in each per-inode map that the kernel's `forget`
/// does not clear (probes, last opens, broken containers); past it a map
/// is emptied and refilled on demand (a file probed again, a page cache
/// dropped once).
const PER_INODE_CAP: usize = 1 << 18;

/// `map.insert(k, v)`, emptying `map` first if it holds [`PER_INODE_CAP`]
/// entries.
fn insert_capped<V>(map: &mut HashMap<u64, V>, k: u64, v: V) -> Option<V> {
    if map.len() >= PER_INODE_CAP {
        map.clear();
    }
    map.insert(k, v)
}

/// One entry of a presented directory.
#[derive(Debug, Clone)]
pub struct DirEntry {
    pub ino: u64,
    pub kind: Kind,
    pub name: OsString,
}

pub struct Fs {
    env: Env,
    /// The source: every look at it goes through this.
    tree: Arc<dyn SourceTree>,
    inodes: Inodes,
    /// Directory listings, cached while their directory is unchanged.
    listings: Listings,
    /// Probe results per source inode, valid while the stamp matches.
    probes: Probes,
    /// Open containers: kept, held by handles, or broken.
    containers: OpenContainers,
    /// Open files and directories.
    handles: Handles,
    /// Messages already logged, so repeated identical errors do not flood.
    warnings: Warnings,
}

/// What `Fs::read_into` produced.
#[derive(Debug, Clone)]
pub enum Filled {
    /// The bytes read are in the buffer.
    Buf,
    /// `n` zero bytes (all in zero chunks): the buffer was not touched;
    /// answer from `ZEROS`.
    Zeros(usize),
    /// These bytes of a span decoded ahead: the buffer was not touched;
    /// answer from the span, then give it back with [`Fs::recycle`].
    Shared(blosc_decode::cache::Block, std::ops::Range<usize>),
}

/// Answers are equal when they are the same bytes of the same buffer.
impl PartialEq for Filled {
    fn eq(&self, other: &Filled) -> bool {
        match (self, other) {
            (Filled::Buf, Filled::Buf) => true,
            (Filled::Zeros(a), Filled::Zeros(b)) => a == b,
            (Filled::Shared(a, r), Filled::Shared(b, s)) => Arc::ptr_eq(a, b) && r == s,
            _ => false,
        }
    }
}

/// Zero bytes to answer reads of holes from. Reads longer than this are
/// filled. Its pages are our own, written once (1 MiB): the kernel copies
/// replies out of its shared zero page (what a zeroed static in .bss maps)
/// more slowly than out of ordinary pages, which would put holes below the
/// FUSE floor.
pub static ZEROS: std::sync::LazyLock<blosc_decode::cache::BlockBuf> =
    std::sync::LazyLock::new(|| {
        let mut b = blosc_decode::cache::BlockBuf::new(1 << 20);
        b.populate();
        b
    });

/// `len` rounded up to a whole number of memory pages.
fn round_to_page(len: u64) -> u64 {
    let page = io::page_size();
    len.div_ceil(page).saturating_mul(page)
}

/// Make `buf` `n` bytes long, zeroing only bytes it never held.
fn set_len(buf: &mut Vec<u8>, n: usize) {
    if buf.len() >= n {
        buf.truncate(n);
    } else {
        buf.resize(n, 0);
    }
}

/// Warnings already logged, by key.
#[derive(Default)]
struct Warnings(Mutex<HashSet<String>>);

impl Warnings {
    /// Log `msg` unless a warning with `key` was (repeated identical
    /// errors do not flood).
    fn once(&self, key: &str, msg: &str) {
        let mut l = self.0.lock();
        if l.len() >= 10_000 {
            l.clear();
        }
        if l.insert(key.to_string()) {
            log::warn!("{msg}");
        }
    }
}

impl Fs {
    pub fn new(root: &Path, opts: &FsOptions) -> std::io::Result<Fs> {
        let root = root.canonicalize()?;
        if !root.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root.display()),
            ));
        }
        Fs::with_tree(Arc::new(LocalTree::new(root)), opts)
    }

    /// The presented tree of `tree`.
    pub fn with_tree(tree: Arc<dyn SourceTree>, opts: &FsOptions) -> std::io::Result<Fs> {
        let env = opts.env();
        let tree: Arc<dyn SourceTree> = Arc::new(stores::StoreTree::new(tree, env.clone()));
        let tree: Arc<dyn SourceTree> = Arc::new(zarr::ZarrTree::new(tree, env.clone()));
        let root = tree.root().to_path_buf();
        let root_dev = tree.stat_follow(&root)?.dev;
        Ok(Fs {
            tree,
            inodes: Inodes::new(root, root_dev),
            env,
            listings: Listings::default(),
            probes: Probes::default(),
            containers: OpenContainers::new(),
            handles: Handles::new(),
            warnings: Warnings::default(),
        })
    }

    /// Log a warning once per `key` (repeated identical errors do not flood).
    fn warn_once(&self, key: &str, msg: &str) {
        self.warnings.once(key, msg);
    }

    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The mount is there: take in the mount table it changed, so that the
    /// first lookup does not read it again.
    pub fn mounted(&self) {
        self.tree.hides(self.tree.root());
    }

    pub fn source_root(&self) -> &Path {
        self.inodes.root()
    }

    fn path_of(&self, ino: u64) -> Result<PathBuf, Error> {
        self.inodes.path_of(ino)
    }

    fn ino_for(&self, md: &Meta) -> u64 {
        self.inodes.ino_for(md)
    }

    /// The stamp that identifies a source's content: the file's own, or for
    /// a sparse-frame directory its `chunks.b2frame`'s.
    /// Does the stamp of `md` (of a sparse frame: of its `chunks.b2frame`)
    /// name one version of the bytes ([`Meta::pinned`])?
    fn pinned(&self, path: &Path, md: &Meta) -> bool {
        if md.is_dir() {
            self.tree
                .stat_follow(&path.join("chunks.b2frame"))
                .is_ok_and(|m| m.pinned)
        } else {
            md.pinned
        }
    }

    fn stamp_of(&self, path: &Path, md: &Meta) -> Option<Stamp> {
        if md.is_dir() {
            self.tree
                .stat_follow(&path.join("chunks.b2frame"))
                .ok()
                .map(|m| m.stamp())
        } else {
            Some(md.stamp())
        }
    }
}

/// Whether a source entry is presented at all (devices, sockets and fifos
/// are not).
fn presented(md: &Meta) -> bool {
    md.kind != EntryKind::Other
}

/// How naming sees an entry ([`names::Naming`]).
fn naming(w: &Shown) -> names::Naming {
    match w {
        Shown::Container(p) => Some(p.npy),
        _ => None,
    }
}
