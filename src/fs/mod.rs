//! The presented tree: inodes, names, attributes and reads, as plain Rust
//! results (errno on failure). `crate::fuse` adapts this to the kernel; the
//! logic here is tested without a mount.
//!
//! Directories mirror SOURCE. Every container (detected by content) is a
//! regular read-only file of its uncompressed bytes, named after its source
//! with one known suffix removed (`.b2nd` arrays become `.npy`); a name that
//! would collide keeps its source name. Everything else passes through.

use crate::cache::Stats;
use crate::container::{Container, Env, View};
use crate::detect::{self, Probe};
use crate::index::ChunkLoc;
use crate::io::{self, Stamp};
use crate::mounts::FuseMounts;
use crate::names;
use crate::srcdir::{Caller, SourceDir};
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

#[derive(Debug, Clone)]
pub struct FsOptions {
    pub cache_size: u64,
    pub verify_checksums: bool,
    /// Bytes to decode past a sequential reader (0: no decode-ahead pool).
    pub decode_ahead: u64,
    /// May block reads bypass the page cache (`O_DIRECT`)?
    pub source_io: crate::io::Access,
}

impl Default for FsOptions {
    fn default() -> Self {
        FsOptions {
            cache_size: 256 << 20,
            verify_checksums: true,
            decode_ahead: crate::container::DEFAULT_DECODE_AHEAD,
            source_io: crate::io::Access::Auto,
        }
    }
}

/// What a source entry is presented as.
#[derive(Debug, Clone)]
enum What {
    Dir,
    Symlink,
    /// A plain file passed through.
    Plain,
    /// A container (file, or sparse-frame directory).
    Container(Probe),
}

impl What {
    fn is_container(&self) -> bool {
        matches!(self, What::Container(_))
    }
}

struct Node {
    /// Source path.
    path: PathBuf,
    parent: u64,
    /// Lookups the kernel has not forgotten yet (`forget`): at zero the
    /// node is dropped. (Inode numbers follow file identities, so every
    /// file a churning source ever held would otherwise stay here.)
    lookups: u64,
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

struct DirListing {
    stamp: Stamp,
    /// (presented name, source name, what, source metadata), sorted by source name.
    entries: Vec<(OsString, OsString, What, Metadata)>,
    /// presented name -> index in `entries`
    by_name: HashMap<OsString, usize>,
    built: Instant,
}

/// A listing is rebuilt when its directory changes, and at the latest after
/// this long (files rewritten in place do not change the directory; probes
/// of unchanged files are cached, so a rebuild costs one stat per entry).
const LISTING_TTL: Duration = Duration::from_secs(1);

/// Opened containers kept without an open handle (each holds file
/// descriptors): at most this many, and at most an eighth of the
/// descriptor limit (a container holds up to two: its file, and the same
/// file opened for direct reads), so the kept ones use at most a quarter.
const CONTAINER_CACHE: usize = 256;
/// ... and at most this much memory of chunk indexes between them (a frame
/// may index 2^24 chunks, about 1.3 GB): the least recently used go first,
/// and one index larger than this is kept only while a handle holds it.
const CONTAINER_INDEX_BUDGET: usize = 64 << 20;

/// Recently opened containers, bounded in count and in index memory.
struct Recent {
    lru: lru::LruCache<u64, (Stamp, Arc<Container>)>,
    bytes: usize,
}

impl Recent {
    fn new() -> Recent {
        let cap = (io::fd_limit() / 8).clamp(4, CONTAINER_CACHE);
        Recent {
            lru: lru::LruCache::new(std::num::NonZeroUsize::new(cap).expect("nonzero")),
            bytes: 0,
        }
    }
    /// Drop the kept containers no open handle holds for which `drop`
    /// says so (their descriptors close); how many went.
    fn drop_idle(&mut self, drop: impl Fn(&Container) -> bool) -> usize {
        let idle: Vec<u64> = self
            .lru
            .iter()
            .filter(|(_, (_, c))| Arc::strong_count(c) == 1 && drop(c))
            .map(|(ino, _)| *ino)
            .collect();
        for ino in &idle {
            self.pop(ino);
        }
        idle.len()
    }
    fn get(&mut self, ino: &u64) -> Option<&(Stamp, Arc<Container>)> {
        self.lru.get(ino)
    }
    fn pop(&mut self, ino: &u64) {
        if let Some((_, c)) = self.lru.pop(ino) {
            self.bytes -= c.index_bytes();
        }
    }
    fn put(&mut self, ino: u64, stamp: Stamp, c: Arc<Container>) {
        self.bytes += c.index_bytes();
        if let Some((_, (_, old))) = self.lru.push(ino, (stamp, c)) {
            self.bytes -= old.index_bytes();
        }
        while self.bytes > CONTAINER_INDEX_BUDGET {
            match self.lru.pop_lru() {
                Some((_, (_, old))) => self.bytes -= old.index_bytes(),
                None => break,
            }
        }
    }
}

enum Handle {
    /// An opened container, the file whose identity it was opened at, that
    /// identity, and the inode it was opened for.
    Container(Arc<Container>, PathBuf, Option<Stamp>, u64),
    /// A file served as its raw bytes: its path and identity at open.
    Plain {
        file: File,
        path: PathBuf,
        stamp: Stamp,
    },
}

pub struct Fs {
    root: PathBuf,
    root_dev: u64,
    env: Env,
    nodes: RwLock<HashMap<u64, Node>>,
    dirs: Mutex<HashMap<u64, Arc<DirListing>>>,
    /// Probe results per source inode, valid while the stamp matches.
    probes: Mutex<HashMap<u64, (Stamp, Option<Probe>)>>,
    /// Recently opened containers (bounded), with the stamp they were opened at.
    containers: Mutex<Recent>,
    /// Containers still held by open handles (shared by new opens).
    live: Mutex<HashMap<u64, (Stamp, Weak<Container>)>>,
    /// Stamp of each inode at its last open: unchanged means the kernel may
    /// keep its page cache.
    last_open: Mutex<HashMap<u64, Stamp>>,
    /// Sources that look like containers but failed to open: listed as
    /// their probe says, and their opens fail with `EIO` at once, while
    /// their stamp is unchanged.
    broken: Mutex<HashMap<u64, Stamp>>,
    /// Open handles, each with the attributes of its file as it was opened:
    /// what `fstat` of it says once its source path is gone or names
    /// another file.
    handles: RwLock<HashMap<u64, (Arc<Handle>, Attr)>>,
    next_fh: AtomicU64,
    /// Messages already logged, so repeated identical errors do not flood.
    logged: Mutex<HashSet<String>>,
    /// FUSE mounts inside the source: never looked into.
    fuse_mounts: FuseMounts,
}

/// What `Fs::read_into` produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filled {
    /// The bytes read are in the buffer.
    Buf,
    /// `n` zero bytes (all in zero chunks): the buffer was not touched;
    /// answer from `ZEROS`.
    Zeros(usize),
}

/// Zero bytes to answer reads of holes from. Reads longer than this are
/// filled. Its pages are our own, written once (1 MiB): replies copied from
/// the kernel's shared zero page (a zeroed static in .bss) cost the daemon
/// 11.5 instead of 7 ticks of system time per GiB here, and holes read at
/// 7.1-7.5 GB/s instead of 10.6-11.5 (an empty FUSE fs: 9.2-10.1).
pub static ZEROS: std::sync::LazyLock<crate::cache::BlockBuf> = std::sync::LazyLock::new(|| {
    let mut b = crate::cache::BlockBuf::new(1 << 20);
    b.populate();
    b
});

/// A 64-bit mixing function (splitmix64's finalizer): spreads a birth time
/// over all the bits of an inode number.
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `len` rounded up to a whole number of memory pages.
fn round_to_page(len: u64) -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    // SAFETY: sysconf only reads a configuration value.
    let page = *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as u64,
        _ => 4096,
    });
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

fn errno_of(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Did an operation fail for want of file descriptors?
fn exhausted(errno: i32) -> bool {
    errno == libc::EMFILE || errno == libc::ENFILE
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
        let mut env = Env::new(opts.cache_size);
        env.verify_checksums = opts.verify_checksums;
        env.decode_ahead = opts.decode_ahead;
        env.source_io = opts.source_io;
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT_INO,
            Node {
                path: root.clone(),
                parent: ROOT_INO,
                lookups: 1,
            },
        );
        let root_dev = std::fs::metadata(&root)?.dev();
        Ok(Fs {
            fuse_mounts: FuseMounts::new(&root),
            root,
            root_dev,
            env,
            nodes: RwLock::new(nodes),
            dirs: Mutex::new(HashMap::new()),
            probes: Mutex::new(HashMap::new()),
            containers: Mutex::new(Recent::new()),
            live: Mutex::new(HashMap::new()),
            last_open: Mutex::new(HashMap::new()),
            broken: Mutex::new(HashMap::new()),
            handles: RwLock::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            logged: Mutex::new(HashSet::new()),
        })
    }

    pub fn env(&self) -> &Env {
        &self.env
    }

    pub fn source_root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, ino: u64) -> Result<PathBuf, i32> {
        self.nodes
            .read()
            .get(&ino)
            .map(|n| n.path.clone())
            .ok_or(libc::ENOENT)
    }

    /// Stable inode number of a source entry: its own inode number, mixed
    /// with the device when it is not the root's and with its birth time
    /// where the file system records one, and never 1. A source inode
    /// number alone names another file once its file is deleted and the
    /// number reused, while the kernel may still hold names (dentries)
    /// leading to it: their requests would reach the new file. With the
    /// birth time, the new file has another number here, and requests
    /// through a stale name find their file gone or replaced
    /// (`what_of`).
    fn ino_for(&self, md: &Metadata) -> u64 {
        let mut ino = md.ino();
        if md.dev() != self.root_dev {
            ino ^= md.dev().rotate_left(48);
        }
        if let Ok(born) = md.created() {
            let ns = born
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            ino ^= mix64(ns) & !(1 << 63);
        }
        if ino == ROOT_INO || ino == 0 {
            ino ^= 1 << 62;
        }
        ino
    }

    /// The stamp that identifies a source's content: the file's own, or for
    /// a sparse-frame directory its `chunks.b2frame`'s.
    fn stamp_of(path: &Path, md: &Metadata) -> Option<Stamp> {
        if md.is_dir() {
            std::fs::metadata(path.join("chunks.b2frame"))
                .ok()
                .map(|m| Stamp::of(&m))
        } else {
            Some(Stamp::of(md))
        }
    }

    /// Is this source a container? Cheap (the first bytes), cached per
    /// (inode, size, mtime, ctime). A source that then fails to open stays
    /// listed as its probe says (its opens fail): its name and size never
    /// change while the file does not. Out of file descriptors (after
    /// releasing idle ones), it fails with `EMFILE` or `ENFILE` and nothing
    /// is cached: the file is not taken for a plain one for good.
    fn probe(&self, path: &Path, md: &Metadata) -> Result<Option<Probe>, i32> {
        let Some(stamp) = Self::stamp_of(path, md) else {
            return Ok(None);
        };
        let key = self.ino_for(md);
        if let Some((s, p)) = self.probes.lock().get(&key) {
            if *s == stamp {
                return Ok(p.clone());
            }
        }
        let probed = self.with_fds(|| match detect::probe_path(path) {
            Err(e) if e.kind == crate::ErrorKind::Io && exhausted(e.errno()) => Err(e.errno()),
            r => Ok(r),
        })?;
        let p = match probed {
            Ok(p) => p,
            // A file refused by the rules for links (`srcdir`), or a
            // failing disk: worth a line.
            Err(e) if e.kind == crate::ErrorKind::Io && e.errno == Some(libc::EIO) => {
                self.warn_once(
                    &format!("probe:{}:{stamp:?}", path.display()),
                    &format!("{e} (not presented as a container)"),
                );
                None
            }
            Err(e) if matches!(e.kind, crate::ErrorKind::Io | crate::ErrorKind::Changed) => {
                log::debug!("{}: cannot probe: {e}", path.display());
                None
            }
            Err(e) => {
                self.warn_once(
                    &format!("probe:{}:{stamp:?}", path.display()),
                    &format!("{e} (looks like a Blosc container but is not readable as one: passed through as raw bytes)"),
                );
                None
            }
        };
        insert_capped(&mut self.probes.lock(), key, (stamp, p.clone()));
        Ok(p)
    }

    /// Run `f`; if it ran out of file descriptors, release those of idle
    /// containers and run it once more.
    fn with_fds<T>(&self, mut f: impl FnMut() -> Result<T, i32>) -> Result<T, i32> {
        match f() {
            Err(e) if exhausted(e) => {
                let n = self.containers.lock().drop_idle(|_| true);
                self.warn_once(
                    "fds-exhausted",
                    &format!("out of file descriptors ({}): closed {n} idle containers and retried (raise the limit, ulimit -n, to keep more open; further shortages are not logged)", std::io::Error::from_raw_os_error(e)),
                );
                f()
            }
            r => r,
        }
    }

    /// Close the descriptors of kept containers no handle holds whose
    /// source file was deleted (its disk space is freed only then); how
    /// many went. The mount calls this every few seconds.
    pub fn release_deleted(&self) -> usize {
        self.containers.lock().drop_idle(|c| c.source_gone())
    }

    /// The presented listing of directory `ino` (cached until the source
    /// directory changes).
    fn listing(&self, ino: u64) -> Result<Arc<DirListing>, i32> {
        let path = self.path_of(ino)?;
        let (stamp, cached) = self.cached_listing(ino, &path)?;
        if let Some(l) = cached {
            return Ok(l);
        }
        let mounts = self.fuse_mounts.inside();
        let found = self.with_fds(|| {
            let mut found = Vec::new();
            for ent in std::fs::read_dir(&path).map_err(|e| errno_of(&e))? {
                let ent = ent.map_err(|e| errno_of(&e))?;
                let p = ent.path();
                // A FUSE mount point is not stat'ed, let alone listed.
                if !mounts.iter().any(|m| p.starts_with(m)) {
                    found.push((ent.file_name(), p));
                }
            }
            Ok(found)
        })?;
        // Probing reads the first bytes of every file: on a cold cache that is
        // I/O-bound, so spread it over a few threads.
        let workers = found.len().div_ceil(256).clamp(1, 8);
        let per = found.len().div_ceil(workers).max(1);
        let raw: Result<Vec<Vec<_>>, i32> = std::thread::scope(|sc| {
            let hs: Vec<_> = found
                .chunks(per)
                .map(|part| {
                    sc.spawn(move || {
                        let mut out = Vec::with_capacity(part.len());
                        for (name, p) in part {
                            let Ok(md) = std::fs::symlink_metadata(p) else {
                                continue;
                            };
                            if !presented(&md) {
                                continue;
                            }
                            let what = self.classify(p, &md)?;
                            out.push((name.clone(), (what, md)));
                        }
                        Ok(out)
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or(Err(libc::EIO)))
                .collect()
        });
        let mut raw: Vec<(OsString, (What, Metadata))> = raw?.into_iter().flatten().collect();
        raw.sort_by(|a, b| a.0.cmp(&b.0));
        let entries: Vec<_> = names::assign(raw, |(w, _)| naming(w))
            .into_iter()
            .map(|(p, n, (w, md))| (p, n, w, md))
            .collect();
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.0.clone(), i))
            .collect();
        let l = Arc::new(DirListing {
            stamp,
            built: Instant::now(),
            entries,
            by_name,
        });
        self.dirs.lock().insert(ino, l.clone());
        Ok(l)
    }

    fn attr_of(&self, ino: u64, what: &What, md: &Metadata, path: &Path) -> Attr {
        let (kind, size, blocks, perm) = match what {
            What::Dir => (Kind::Dir, md.len(), md.blocks(), (md.mode() & 0o555) as u16),
            // The length of the target `readlink` gives.
            What::Symlink => {
                let len = std::fs::read_link(path)
                    .ok()
                    .and_then(|t| self.presented_target(path, t.as_os_str().as_bytes()))
                    .map_or(md.len(), |t| t.len() as u64);
                (Kind::Symlink, len, md.blocks(), 0o777)
            }
            What::Plain => (
                Kind::File,
                md.len(),
                md.blocks(),
                (md.mode() & 0o555) as u16,
            ),
            What::Container(p) if md.is_dir() => {
                // No wider than the directory and every file it exposes
                // (the directory at `path` checked to be the one `md`
                // describes: nothing readable if it is not).
                let (perm, blocks) = match SourceDir::open(path, false) {
                    Ok(d) if d.is(md) => d.frame_access(),
                    _ => (0, 0),
                };
                (Kind::File, p.len, blocks, perm)
            }
            What::Container(p) => (Kind::File, p.len, md.blocks(), (md.mode() & 0o555) as u16),
        };
        let t = |s: i64, ns: i64| {
            if s >= 0 {
                UNIX_EPOCH + Duration::new(s as u64, ns as u32)
            } else {
                UNIX_EPOCH
            }
        };
        Attr {
            ino,
            kind,
            size,
            blocks,
            atime: t(md.atime(), md.atime_nsec()),
            mtime: t(md.mtime(), md.mtime_nsec()),
            ctime: t(md.ctime(), md.ctime_nsec()),
            perm,
            nlink: if kind == Kind::Dir {
                md.nlink() as u32
            } else {
                1
            },
            uid: md.uid(),
            gid: md.gid(),
            blksize: 128 * 1024,
        }
    }

    /// The listing of directory `ino` at `path` if one is cached and still
    /// valid, with the directory's current stamp.
    fn cached_listing(
        &self,
        ino: u64,
        path: &Path,
    ) -> Result<(Stamp, Option<Arc<DirListing>>), i32> {
        // A directory renamed or replaced since the kernel looked it up
        // under this path: its names must not be looked up in whatever
        // directory holds the path now.
        let dmd = self.source_md(ino, path)?;
        let stamp = Stamp::of(&dmd);
        let l = self.dirs.lock().get(&ino).cloned();
        Ok((
            stamp,
            l.filter(|l| l.stamp == stamp && l.built.elapsed() < LISTING_TTL),
        ))
    }

    /// The source path presented as `name` in directory `parent`, and
    /// whether the listing it came from saw a container there (`None`: not
    /// from a listing). Without a valid listing at hand only the few source
    /// names that could be presented as `name` are looked at
    /// ([`names::resolve`]): the first lookup in a large directory does not
    /// wait for every file in it to be probed.
    fn source_of(&self, parent: u64, name: &OsStr) -> Result<(PathBuf, Option<bool>), i32> {
        // Not entries of any listing, and not to be joined to a path.
        if name.is_empty() || name == "." || name == ".." || name.as_bytes().contains(&b'/') {
            return Err(libc::ENOENT);
        }
        let dir = self.path_of(parent)?;
        let listed = |l: &DirListing| {
            let (_, src, what, _) = &l.entries[*l.by_name.get(name).ok_or(libc::ENOENT)?];
            Ok((dir.join(src), Some(what.is_container())))
        };
        if let (_, Some(l)) = self.cached_listing(parent, &dir)? {
            return listed(&l);
        }
        // A probe that ran out of descriptors: the lookup fails with that.
        let failed = std::cell::Cell::new(None);
        let look = |src: &OsStr| {
            let p = dir.join(src);
            if self.fuse_mounts.blocks(&p) {
                return None;
            }
            let md = std::fs::symlink_metadata(&p).ok()?;
            if !presented(&md) {
                return None;
            }
            match self.classify(&p, &md) {
                Ok(w) => Some(naming(&w)),
                Err(e) => {
                    failed.set(Some(e));
                    None
                }
            }
        };
        let found = names::resolve(name, look);
        if let Some(e) = failed.get() {
            return Err(e);
        }
        match found {
            Ok(found) => Ok((dir.join(found.ok_or(libc::ENOENT)?), None)),
            Err(()) => listed(&*self.listing(parent)?),
        }
    }

    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Attr, i32> {
        for attempt in 0..2 {
            let (path, listed) = self.source_of(parent, name)?;
            if self.fuse_mounts.blocks(&path) {
                return Err(libc::ENOENT);
            }
            // Attributes are always fresh; the listing only maps the name.
            let md = match std::fs::symlink_metadata(&path) {
                Ok(md) => md,
                Err(_) if attempt == 0 => {
                    self.dirs.lock().remove(&parent);
                    continue;
                }
                Err(e) => return Err(errno_of(&e)),
            };
            let what = self.classify(&path, &md)?;
            if attempt == 0 && listed.is_some_and(|c| c != what.is_container()) {
                // Became (or stopped being) a container in place: names change.
                self.dirs.lock().remove(&parent);
                continue;
            }
            let ino = self.ino_for(&md);
            let mut nodes = self.nodes.write();
            let n = nodes.entry(ino).or_insert_with(|| Node {
                path: path.clone(),
                parent,
                lookups: 0,
            });
            n.path = path.clone();
            n.parent = parent;
            n.lookups += 1;
            drop(nodes);
            return Ok(self.attr_of(ino, &what, &md, &path));
        }
        Err(libc::ENOENT)
    }

    /// What a source entry is presented as.
    /// (Fails only when out of file descriptors: `EMFILE`, `ENFILE`.)
    fn classify(&self, path: &Path, md: &Metadata) -> Result<What, i32> {
        Ok(if md.file_type().is_symlink() {
            What::Symlink
        } else if md.is_dir() {
            match self.probe(path, md)? {
                Some(p) => What::Container(p),
                None => What::Dir,
            }
        } else {
            match self.probe(path, md)? {
                Some(p) => What::Container(p),
                None => What::Plain,
            }
        })
    }

    /// What `ino` is now (re-read from the source; `ESTALE` as
    /// [`Fs::source_md`]).
    fn what_of(&self, ino: u64) -> Result<(PathBuf, What, Metadata), i32> {
        let path = self.path_of(ino)?;
        let md = self.source_md(ino, &path)?;
        let what = if ino == ROOT_INO {
            What::Dir
        } else {
            self.classify(&path, &md)?
        };
        Ok((path, what, md))
    }

    /// The metadata of `path`, the source of `ino`, if it is still the file
    /// `ino` was looked up as: `ESTALE` when it is gone or another file
    /// (deleted and recreated, or replaced by rename). The kernel then looks
    /// the name up again instead of being served the other file, and finds
    /// a hard-linked file under its name that is left.
    /// A path at or below a FUSE mount inside the source is not looked at
    /// (`ESTALE`: the kernel looks the name up again, and does not find it).
    fn source_md(&self, ino: u64, path: &Path) -> Result<Metadata, i32> {
        if ino != ROOT_INO && self.fuse_mounts.blocks(path) {
            return Err(libc::ESTALE);
        }
        let md = std::fs::symlink_metadata(path).map_err(|e| match errno_of(&e) {
            libc::ENOENT if ino != ROOT_INO => libc::ESTALE,
            n => n,
        })?;
        if ino != ROOT_INO && self.ino_for(&md) != ino {
            return Err(libc::ESTALE);
        }
        Ok(md)
    }

    pub fn getattr(&self, ino: u64) -> Result<Attr, i32> {
        let (path, what, md) = self.what_of(ino)?;
        Ok(self.attr_of(ino, &what, &md, &path))
    }

    /// `getattr` asked through an open handle (`fstat`): once the source
    /// path is gone or names another file, the attributes the file had
    /// when this handle opened it (the handle still reads that version or
    /// fails), not an error.
    pub fn getattr_open(&self, ino: u64, fh: Option<u64>) -> Result<Attr, i32> {
        match self.getattr(ino) {
            Err(e) if e == libc::ESTALE || e == libc::ENOENT => fh
                .and_then(|fh| self.handles.read().get(&fh).map(|(_, a)| a.clone()))
                .ok_or(e),
            r => r,
        }
    }

    /// Entries of directory `ino` (with `.` and `..`).
    pub fn readdir(&self, ino: u64) -> Result<Vec<DirEntry>, i32> {
        let l = self.listing(ino)?;
        let parent = self
            .nodes
            .read()
            .get(&ino)
            .map(|n| n.parent)
            .unwrap_or(ROOT_INO);
        let mut out = vec![
            DirEntry {
                ino,
                kind: Kind::Dir,
                name: ".".into(),
            },
            DirEntry {
                ino: parent,
                kind: Kind::Dir,
                name: "..".into(),
            },
        ];
        for (presented, _, what, md) in &l.entries {
            let cino = self.ino_for(md);
            out.push(DirEntry {
                ino: cino,
                kind: match what {
                    What::Dir => Kind::Dir,
                    What::Symlink => Kind::Symlink,
                    _ => Kind::File,
                },
                name: presented.clone(),
            });
        }
        Ok(out)
    }

    /// The kernel forgets `n` lookups of `ino`: at none left, the node goes.
    pub fn forget(&self, ino: u64, n: u64) {
        if ino == ROOT_INO {
            return;
        }
        let mut nodes = self.nodes.write();
        if let Some(node) = nodes.get_mut(&ino) {
            node.lookups = node.lookups.saturating_sub(n);
            if node.lookups == 0 {
                nodes.remove(&ino);
                drop(nodes);
                self.last_open.lock().remove(&ino);
            }
        }
    }

    /// How many inodes the kernel holds (tests: `forget` empties it).
    pub fn nodes_held(&self) -> usize {
        self.nodes.read().len() - 1
    }

    /// The target of link `ino`; when it is relative and names, inside the
    /// source, a container presented under another name, with its last
    /// component rewritten to that name (the link would dangle otherwise).
    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>, i32> {
        let path = self.path_of(ino)?;
        if self.fuse_mounts.blocks(&path) {
            return Err(libc::ESTALE);
        }
        let target = std::fs::read_link(&path)
            .map(|t| t.into_os_string().into_vec())
            .map_err(|e| errno_of(&e))?;
        Ok(self.presented_target(&path, &target).unwrap_or(target))
    }

    /// `target` (of the link at `link`) with its last component renamed as
    /// the mount presents it, or `None` to leave it as it is: absolute,
    /// leaving the source, through another link, not a container, missing,
    /// or presented under its own name. The target itself is not followed
    /// if it is a link.
    fn presented_target(&self, link: &Path, target: &[u8]) -> Option<Vec<u8>> {
        let t = Path::new(OsStr::from_bytes(target));
        if t.is_absolute() || target.ends_with(b"/") {
            return None;
        }
        let mut dir = link.parent()?.to_path_buf();
        let mut parts: Vec<_> = t.components().collect();
        let std::path::Component::Normal(name) = parts.pop()? else {
            return None;
        };
        // `a/.` is read as `a` by `components`: the bytes must end in the name.
        let head = target.strip_suffix(name.as_bytes())?;
        if !(head.is_empty() || head.ends_with(b"/")) {
            return None;
        }
        for c in parts {
            match c {
                std::path::Component::CurDir => {}
                std::path::Component::ParentDir if dir != self.root => {
                    dir.pop();
                }
                // A directory, not a link (which the kernel would follow
                // elsewhere, `..` included).
                std::path::Component::Normal(n) => {
                    dir.push(n);
                    let md = std::fs::symlink_metadata(&dir).ok()?;
                    if !md.is_dir() || self.fuse_mounts.blocks(&dir) {
                        return None;
                    }
                }
                _ => return None,
            }
        }
        let shown = self.presented_in(&dir, name)?;
        (shown != name).then(|| [head, shown.as_bytes()].concat())
    }

    /// The name source entry `name` of source directory `dir` is presented
    /// under (`None`: not presented), as the directory's listing names it:
    /// from its cached listing if there is one, else from the few entries
    /// that could take the name it wants ([`names::resolve`]).
    fn presented_in(&self, dir: &Path, name: &OsStr) -> Option<OsString> {
        let dir_ino = if dir == self.root {
            Some(ROOT_INO)
        } else {
            let ino = self.ino_for(&std::fs::symlink_metadata(dir).ok()?);
            let known = self.nodes.read().get(&ino).is_some_and(|n| n.path == dir);
            known.then_some(ino)
        };
        let from = |l: &DirListing| l.entries.iter().find(|e| e.1 == name).map(|e| e.0.clone());
        if let Some(ino) = dir_ino {
            if let Ok((_, Some(l))) = self.cached_listing(ino, dir) {
                return from(&l);
            }
        }
        let look = |src: &OsStr| self.naming_at(&dir.join(src));
        let wants = names::wanted(name, look(name)?);
        let Some(w) = wants else {
            return Some(name.to_os_string());
        };
        match names::resolve(&w, look) {
            Ok(Some(s)) if s == name => Some(w),
            Ok(_) => Some(name.to_os_string()),
            Err(()) => from(&*self.listing(dir_ino?).ok()?),
        }
    }

    /// How naming sees the source entry at `p` (`None`: absent, not
    /// presented, or not classified).
    fn naming_at(&self, p: &Path) -> Option<names::Naming> {
        if self.fuse_mounts.blocks(p) {
            return None;
        }
        let md = std::fs::symlink_metadata(p).ok()?;
        if !presented(&md) {
            return None;
        }
        self.classify(p, &md).ok().map(|w| naming(&w))
    }

    /// The container behind `ino`, opened (or reused while its source is
    /// unchanged). `Ok(None)`: the source looks like a container but cannot
    /// be opened as one (one warning); it is not tried again until it
    /// changes.
    fn container(
        &self,
        ino: u64,
        path: &Path,
        md: &Metadata,
    ) -> Result<Option<Arc<Container>>, i32> {
        let stamp = Self::stamp_of(path, md).ok_or(libc::ENOENT)?;
        if self.broken.lock().get(&ino) == Some(&stamp) {
            return Ok(None);
        }
        {
            let mut cache = self.containers.lock();
            match cache.get(&ino) {
                Some((s, c)) if *s == stamp => return Ok(Some(c.clone())),
                Some(_) => {
                    // Changed underneath: drop the stale one.
                    cache.pop(&ino);
                }
                None => {}
            }
        }
        let live = self
            .live
            .lock()
            .get(&ino)
            .filter(|(s, _)| *s == stamp)
            .and_then(|(_, w)| w.upgrade());
        if let Some(c) = live {
            self.containers.lock().put(ino, stamp, c.clone());
            return Ok(Some(c));
        }
        // Opening reads the index: done without any lock held.
        let mut opened = None;
        let _ = self.with_fds(|| {
            let r = self.open_checked(path, md);
            let e = match &r {
                Err(e) if e.kind == crate::ErrorKind::Io && exhausted(e.errno()) => Err(e.errno()),
                _ => Ok(()),
            };
            opened = Some(r);
            e
        });
        let c = match opened.expect("ran at least once") {
            Ok(Some(c)) => Arc::new(c),
            Ok(None) => {
                let msg = format!("{}: no longer looks like a Blosc container", path.display());
                self.mark_broken(ino, stamp, path, &msg);
                return Ok(None);
            }
            Err(e) if matches!(e.kind, crate::ErrorKind::Io | crate::ErrorKind::Changed) => {
                // (Running out of descriptors is logged once, by `with_fds`.)
                if !exhausted(e.errno()) {
                    self.warn_once(&e.to_string(), &e.to_string());
                }
                return Err(e.errno());
            }
            Err(e) => {
                self.mark_broken(ino, stamp, path, &e.in_file(path).to_string());
                return Ok(None);
            }
        };
        self.containers.lock().put(ino, stamp, c.clone());
        let mut live = self.live.lock();
        if live.len() >= 4 * CONTAINER_CACHE {
            live.retain(|_, (_, w)| w.strong_count() > 0);
        }
        live.insert(ino, (stamp, Arc::downgrade(&c)));
        Ok(Some(c))
    }

    /// Open the container at `path` if it is still the file or directory
    /// `md` describes (checked on what was opened: a name swapped for a
    /// symbolic link after it was looked up is never followed).
    fn open_checked(&self, path: &Path, md: &Metadata) -> crate::Result<Option<Container>> {
        let swapped = || {
            crate::Error::new(
                crate::ErrorKind::Changed,
                "replaced since it was looked up: not opened",
            )
            .in_file(path)
        };
        if md.is_dir() {
            if !crate::open::frame::is_sframe_dir(path) {
                return Ok(None);
            }
            let dir =
                SourceDir::open(path, false).map_err(|e| crate::Error::from(e).in_file(path))?;
            if !dir.is(md) {
                return Err(swapped());
            }
            return detect::open_sframe_dir(Arc::new(dir), &self.env).map(Some);
        }
        let (file, fmd) =
            io::open_regular(path).map_err(|e| crate::Error::from(e).in_file(path))?;
        if !same_file(&fmd, md) {
            return Err(swapped());
        }
        let src = Arc::new(io::FileSource::opened(file, &fmd, path));
        detect::open_source(src, path, &self.env)
    }

    /// Drop `c` from the open containers kept for `ino` (not another one
    /// opened since), so the next open of `ino` opens it again.
    fn forget_container(&self, ino: u64, c: &Arc<Container>) {
        let mut cache = self.containers.lock();
        if cache.get(&ino).is_some_and(|(_, k)| Arc::ptr_eq(k, c)) {
            cache.pop(&ino);
        }
        drop(cache);
        let mut live = self.live.lock();
        if live
            .get(&ino)
            .is_some_and(|(_, w)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(c)))
        {
            live.remove(&ino);
        }
    }

    /// `why` names the file and the reason.
    fn mark_broken(&self, ino: u64, stamp: Stamp, path: &Path, why: &str) {
        insert_capped(&mut self.broken.lock(), ino, stamp);
        self.warn_once(
            &format!("broken:{}:{stamp:?}", path.display()),
            &format!("{why} (not opened as a container: opens fail with EIO until it changes)"),
        );
    }

    /// Log a warning once per `key` (repeated identical errors do not flood).
    fn warn_once(&self, key: &str, msg: &str) {
        let mut l = self.logged.lock();
        if l.len() >= 10_000 {
            l.clear();
        }
        if l.insert(key.to_string()) {
            log::warn!("{msg}");
        }
    }

    /// Open `ino` for reading: returns a handle and whether the kernel may
    /// keep its page cache (the content is unchanged since it was last open).
    pub fn open(&self, ino: u64, write: bool) -> Result<(u64, bool), i32> {
        self.open_as(ino, write, None)
    }

    /// [`Fs::open`] for `caller`, if given: refused (`EACCES`) unless the
    /// attributes the file has now let the caller read it (the kernel
    /// checked ones it may have held for a while: a sparse frame's chunk
    /// files may have been made unreadable since).
    pub fn open_as(
        &self,
        ino: u64,
        write: bool,
        caller: Option<&Caller>,
    ) -> Result<(u64, bool), i32> {
        if write {
            return Err(libc::EROFS);
        }
        let (path, what, md) = self.what_of(ino)?;
        match &what {
            What::Dir => return Err(libc::EISDIR),
            What::Symlink => return Err(libc::ELOOP),
            _ => {}
        }
        let fresh = self.attr_of(ino, &what, &md, &path);
        if caller.is_some_and(|c| !c.may_read(fresh.perm, fresh.uid, fresh.gid)) {
            return Err(libc::EACCES);
        }
        let h = match &what {
            // (Directories and links returned above.)
            What::Plain | What::Dir | What::Symlink => {
                let (file, fmd) =
                    self.with_fds(|| io::open_regular(&path).map_err(|e| errno_of(&e)))?;
                // The file checked (not a link), not one put in its place since.
                if !same_file(&fmd, &md) {
                    return Err(libc::ESTALE);
                }
                Handle::Plain {
                    file,
                    path: path.clone(),
                    stamp: Stamp::of(&fmd),
                }
            }
            What::Container(p) => {
                // One that fails to open: listed as its probe says, and its
                // opens fail (a raw view would be another size than listed).
                let c = self.container(ino, &path, &md)?.ok_or(libc::EIO)?;
                if c.len() != p.len {
                    let stamp = Self::stamp_of(&path, &md).ok_or(libc::ENOENT)?;
                    let why = format!(
                        "{}: presents {} bytes but is listed with {}",
                        path.display(),
                        c.len(),
                        p.len
                    );
                    self.forget_container(ino, &c);
                    self.mark_broken(ino, stamp, &path, &why);
                    return Err(libc::EIO);
                }
                let sp = if md.is_dir() {
                    path.join("chunks.b2frame")
                } else {
                    path.clone()
                };
                Handle::Container(c, sp, Self::stamp_of(&path, &md), ino)
            }
        };
        let attr = fresh;
        let keep = match Self::stamp_of(&path, &md) {
            Some(stamp) => insert_capped(&mut self.last_open.lock(), ino, stamp) == Some(stamp),
            None => false,
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.write().insert(fh, (Arc::new(h), attr));
        Ok((fh, keep))
    }

    /// May a handle that serves `path` as raw bytes go on doing so, its
    /// file's metadata now being `md`? Yes while the file is unchanged since
    /// it was opened, or changed but still not a container (a growing log
    /// can be followed). One whose file now looks like a container fails:
    /// the two views of one inode must never meet in the kernel's page
    /// cache, where one read could return pages of both. (A file replaced
    /// by rename is another inode: the handle reads its own.)
    fn raw_view_holds(&self, path: &Path, md: &Metadata, stamp: Stamp) -> bool {
        Stamp::of(md) == stamp || matches!(self.probe(path, md), Ok(None))
    }

    /// Log once that `path` changed under an open handle (`why`, if any),
    /// and the errno its reads fail with until it is reopened.
    fn changed_while_open(&self, path: &Path, why: &str) -> i32 {
        let why = if why.is_empty() {
            String::new()
        } else {
            format!(" ({why})")
        };
        let msg = format!(
            "{}: changed while open{why}; reads fail until it is reopened",
            path.display()
        );
        self.warn_once(&msg, &msg);
        libc::EIO
    }

    pub fn release(&self, fh: u64) {
        self.handles.write().remove(&fh);
    }

    fn handle(&self, fh: u64) -> Result<Arc<Handle>, i32> {
        self.handles
            .read()
            .get(&fh)
            .map(|(h, _)| h.clone())
            .ok_or(libc::EBADF)
    }

    /// Read up to `size` bytes at `offset` into `buf` (its length becomes the
    /// bytes read; its old contents are overwritten, not zeroed first: a
    /// 1 MiB request would otherwise be written twice).
    pub fn read_into(
        &self,
        fh: u64,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Result<Filled, i32> {
        self.read_request(fh, offset, size, false, buf)
    }

    /// A read as the kernel sends it. `paged`: for its page cache (not
    /// `O_DIRECT`). The kernel asks for pages only below the size it holds
    /// for the file, and takes a short answer for the end of the file: it
    /// fills the rest of the pages asked for with zeros and keeps them as
    /// the file's content. So a paged request that reaches a page past the
    /// end of the version this handle serves (the kernel's size is another
    /// version's: the source changed and the kernel has not seen it yet), or
    /// that the source shrank under while it was read, fails with `EIO`
    /// instead of being answered short.
    pub fn read_request(
        &self,
        fh: u64,
        offset: u64,
        size: u32,
        paged: bool,
        buf: &mut Vec<u8>,
    ) -> Result<Filled, i32> {
        let h = self.handle(fh)?;
        let stale = |path: &Path, len: u64| {
            Err(self.changed_while_open(
                path,
                &format!("its size is now {len}, not what the kernel holds"),
            ))
        };
        let past_end = |len: u64| paged && offset.saturating_add(size as u64) > round_to_page(len);
        match &*h {
            Handle::Plain {
                file: f,
                path,
                stamp,
            } => {
                let md = f.metadata().map_err(|e| errno_of(&e))?;
                if !self.raw_view_holds(path, &md, *stamp) {
                    return Err(
                        self.changed_while_open(path, "may now be presented as a container")
                    );
                }
                let len = md.len();
                if past_end(len) {
                    return stale(path, len);
                }
                set_len(buf, size as usize);
                let mut done = 0;
                while done < buf.len() {
                    match f.read_at(&mut buf[done..], offset + done as u64) {
                        Ok(0) => break,
                        Ok(n) => done += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(errno_of(&e)),
                    }
                }
                if paged && (done as u64) < (size as u64).min(len.saturating_sub(offset)) {
                    // Cut while it was read.
                    return stale(path, offset + done as u64);
                }
                buf.truncate(done);
                Ok(Filled::Buf)
            }
            Handle::Container(c, sp, stamp, ino) => {
                // A source rewritten or truncated under an open handle: EIO
                // (reopen to see the new content), never old offsets over new bytes.
                match std::fs::metadata(sp) {
                    Ok(m) if Some(Stamp::of(&m)) == *stamp => {}
                    _ => return Err(self.changed_while_open(sp, "")),
                }
                let len = c.len();
                if past_end(len) {
                    return stale(sp, len);
                }
                if offset >= len {
                    buf.clear();
                    return Ok(Filled::Buf);
                }
                let n = (size as u64).min(len - offset) as usize;
                // (The zero buffer is made on the first read of a hole.)
                if c.is_zero(offset, n as u64) && n <= ZEROS.len() {
                    let st = &c.env().stats;
                    Stats::add(&st.special_bytes_served, n as u64);
                    Stats::add(&st.bytes_served, n as u64);
                    return Ok(Filled::Zeros(n));
                }
                set_len(buf, n);
                match c.read_at(offset, buf) {
                    Ok(got) => {
                        buf.truncate(got);
                        Ok(Filled::Buf)
                    }
                    Err(e) => {
                        if e.kind == crate::ErrorKind::Changed {
                            // A file of it (a sparse frame's chunk file) was
                            // rewritten while the container's own stamp says
                            // unchanged: the next open opens it afresh.
                            self.forget_container(*ino, c);
                        }
                        // One line per (file, chunk, reason), not per read.
                        let key = format!("read:{:?}:{:?}:{}", e.path, e.chunk, e.reason);
                        self.warn_once(
                            &key,
                            &format!("{e} (read of {n} bytes at offset {offset} fails with EIO; further failures like this are not logged)"),
                        );
                        Err(e.errno())
                    }
                }
            }
        }
    }

    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, i32> {
        let mut v = Vec::new();
        if let Filled::Zeros(n) = self.read_into(fh, offset, size, &mut v)? {
            v = vec![0; n];
        }
        Ok(v)
    }

    /// `SEEK_DATA` / `SEEK_HOLE`: zero chunks are holes.
    pub fn lseek(&self, fh: u64, offset: i64, whence: i32) -> Result<i64, i32> {
        let h = self.handle(fh)?;
        let c = match &*h {
            Handle::Container(c, ..) => c,
            Handle::Plain { file: f, .. } => {
                let r = unsafe { libc::lseek(std::os::fd::AsRawFd::as_raw_fd(f), offset, whence) };
                return if r < 0 {
                    Err(std::io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::EIO))
                } else {
                    Ok(r)
                };
            }
        };
        let len = c.len() as i64;
        if offset < 0 || offset >= len {
            return Err(libc::ENXIO);
        }
        match whence {
            libc::SEEK_SET => Ok(offset),
            libc::SEEK_DATA | libc::SEEK_HOLE => {
                let want_hole = whence == libc::SEEK_HOLE;
                // Only the raw view maps linearly onto chunks.
                if !matches!(c.view(), View::Raw) {
                    return Ok(if want_hole { len } else { offset });
                }
                let off = offset as u64;
                let chunks = c.checked_chunks().map_err(|e| e.errno())?;
                let start = chunks.partition_point(|e| e.uoff + e.ulen <= off);
                for (ci, e) in chunks.iter().enumerate().skip(start) {
                    let hole = match &e.loc {
                        ChunkLoc::Special { kind, .. } => kind.is_zeros(),
                        // A stored chunk whose header says "all zeros" is a hole too
                        // (reads its header once; an unreadable one counts as data).
                        ChunkLoc::Stored { .. } => c
                            .layout(ci)
                            .ok()
                            .and_then(|l| l.special)
                            .is_some_and(|k| k.is_zeros()),
                    };
                    if hole == want_hole {
                        return Ok(e.uoff.max(off) as i64);
                    }
                }
                if want_hole {
                    Ok(len)
                } else {
                    Err(libc::ENXIO)
                }
            }
            _ => Err(libc::EINVAL),
        }
    }

    /// Extended attributes of `ino` (name, value).
    pub fn xattrs(&self, ino: u64) -> Result<Vec<(String, Vec<u8>)>, i32> {
        let mut out = Vec::new();
        if ino == ROOT_INO {
            let mut stats = self.env.stats.render(&self.env.cache);
            stats.push_str(&format!("inodes_held={}\n", self.nodes_held()));
            out.push(("user.bloscfs.stats".to_string(), stats.into_bytes()));
            return Ok(out);
        }
        let (path, what, md) = self.what_of(ino)?;
        if let What::Container(_) = what {
            let Some(c) = self.container(ino, &path, &md)? else {
                return Ok(out);
            };
            let i = c.info();
            let mut add =
                |k: &str, v: String| out.push((format!("user.blosc.{k}"), v.into_bytes()));
            add("format", i.format.clone());
            add("codec", i.codec.clone());
            add("filters", i.filters.join(","));
            add("typesize", i.typesize.to_string());
            add("chunksize", i.chunksize.to_string());
            let bs = c
                .chunks()
                .iter()
                .position(|e| matches!(e.loc, ChunkLoc::Stored { .. }))
                .and_then(|ci| c.layout(ci).ok())
                .and_then(|l| l.header.fixed_blocksize())
                .unwrap_or(0);
            add("blocksize", bs.to_string());
            add("nchunks", i.nchunks.to_string());
            add("nbytes", i.nbytes.to_string());
            add("cbytes", i.cbytes.to_string());
            let r = if i.cbytes > 0 {
                i.nbytes as f64 / i.cbytes as f64
            } else {
                0.0
            };
            add("cratio", format!("{r:.3}"));
            if let View::Npy { descr, nd, .. } = c.view() {
                add("dtype", descr.clone());
                if let Some(nd) = nd {
                    add("shape", format!("{:?}", nd.shape));
                    add("chunkshape", format!("{:?}", nd.chunkshape));
                    add("blockshape", format!("{:?}", nd.blockshape));
                }
            }
            for (n, v) in i.metalayers.iter().chain(i.vlmetalayers.iter()) {
                out.push((format!("user.blosc.meta.{n}"), v.clone()));
            }
        }
        Ok(out)
    }

    pub fn getxattr(&self, ino: u64, name: &OsStr) -> Result<Vec<u8>, i32> {
        // Tools ask for security.* and system.* attributes on every file
        // (`ls -l`): answer those without opening the container.
        if !name.as_bytes().starts_with(b"user.blosc") {
            return Err(libc::ENODATA);
        }
        self.xattrs(ino)?
            .into_iter()
            .find(|(n, _)| n.as_bytes() == name.as_bytes())
            .map(|(_, v)| v)
            .ok_or(libc::ENODATA)
    }

    /// NUL-separated attribute names.
    pub fn listxattr(&self, ino: u64) -> Result<Vec<u8>, i32> {
        let mut v = Vec::new();
        for (n, _) in self.xattrs(ino)? {
            v.extend_from_slice(n.as_bytes());
            v.push(0);
        }
        Ok(v)
    }

    /// (blocks, bfree, bavail, files, ffree, bsize, namelen, frsize) of the source file system.
    pub fn statfs(&self) -> Result<[u64; 8], i32> {
        let c =
            std::ffi::CString::new(self.root.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a valid NUL-terminated path and `s` a valid out-pointer.
        if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO));
        }
        Ok([
            s.f_blocks,
            0,
            0,
            s.f_files,
            0,
            s.f_bsize,
            s.f_namemax,
            s.f_frsize,
        ])
    }
}

/// Whether a source entry is presented at all (devices, sockets and fifos
/// are not).
fn presented(md: &Metadata) -> bool {
    md.is_file() || md.is_dir() || md.file_type().is_symlink()
}

/// Are these the same file (device and inode)?
fn same_file(a: &Metadata, b: &Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// How naming sees an entry ([`names::Naming`]).
fn naming(w: &What) -> names::Naming {
    match w {
        What::Container(p) => Some(p.npy),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container of `n` zero chunks of 1 KiB (an index and nothing else).
    fn zeros_container(n: usize) -> Arc<Container> {
        use crate::index::{ChunkEntry, ChunkLoc, Index, Info};
        let chunks = (0..n as u64)
            .map(|i| ChunkEntry {
                chunk: i,
                uoff: i * 1024,
                ulen: 1024,
                loc: ChunkLoc::Special {
                    kind: crate::format::chunk::Special::Zeros,
                    typesize: 1,
                    value: Box::new([]),
                },
                checksum: None,
            })
            .collect();
        let index = Index {
            sources: Vec::new(),
            chunks,
            info: Info {
                nbytes: n as u64 * 1024,
                nchunks: n as u64,
                ..Info::default()
            },
            sizes_assumed: false,
        };
        Arc::new(Container::new(Path::new("z"), index, Env::with_workers(1 << 20, 0)).unwrap())
    }

    /// Recently opened containers are bounded by the memory of their
    /// indexes, least recently used out first; one index over the budget is
    /// not kept at all.
    #[test]
    fn recent_containers_bounded_by_index_memory() {
        let stamp = Stamp {
            size: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            ino: 0,
            dev: 0,
        };
        let mut r = Recent::new();
        let one = zeros_container(100_000); // ~8 MB of index
        let per = one.index_bytes();
        assert!(per > 4 << 20);
        let fit = CONTAINER_INDEX_BUDGET / per;
        for ino in 0..fit as u64 + 3 {
            r.put(ino, stamp, zeros_container(100_000));
            assert!(r.bytes <= CONTAINER_INDEX_BUDGET);
        }
        assert_eq!(r.lru.len(), fit);
        assert!(r.get(&0).is_none(), "the least recently used went first");
        assert!(r.get(&(fit as u64 + 2)).is_some());
        r.pop(&(fit as u64 + 2));
        assert_eq!(r.bytes, (fit - 1) * per);
        let huge = zeros_container(CONTAINER_INDEX_BUDGET / 80 + 1);
        r.put(1000, stamp, huge);
        assert!(r.bytes <= CONTAINER_INDEX_BUDGET && r.get(&1000).is_none());
    }
}
