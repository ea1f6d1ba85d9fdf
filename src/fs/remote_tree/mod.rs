//! A remote store (S3 API, HTTP, Caterva2) as the source tree, through
//! [`bloscfs_remote::Remote`]: directories are prefixes, files are objects,
//! every container a [`RemoteObject`] pinned to the version it was listed
//! with. What a listing says is kept (`listed.rs`) for `metadata_ttl` from
//! its end (longer for a listing that took long) and answers the stats
//! that follow it; after that a stat asks the store again, so a replaced
//! object is seen (with a new inode: handles opened on the old version
//! fail, new opens read the new one).

mod files;
mod listed;
mod perms;

use super::source_tree::{stat_file, EntryKind, Meta, RawFile, SourceTree, Time};
use super::Error;
use super::Statfs;
use crate::config::Perms;
use blosc_decode::container::{Container, Env};
use blosc_decode::detect::{self, Probe};
use blosc_decode::io::{First, Source};
use bloscfs_remote::{Entry, Object, Remote};
use files::{RemoteFrame, RemoteRaw};
use listed::{Gate, Listed};
use parking_lot::Mutex;
use perms::Shown;
use std::collections::HashMap;
use std::ffi::OsString;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The name of a sparse frame's index inside its directory.
const SFRAME_INDEX: &str = "chunks.b2frame";

/// Entries kept from listings before expired ones are dropped.
const PRUNE_AT: usize = 1 << 16;

/// What the store said an entry is, and when.
#[derive(Clone)]
struct Seen {
    at: Instant,
    node: Node,
}

#[derive(Clone)]
enum Node {
    Dir,
    Object(Object),
}

/// A remote store presented as a directory tree.
pub struct RemoteTree {
    /// The location's URL as a path (`s3://bucket/prefix`): the paths the
    /// presented tree uses are this joined with the keys below it.
    root: PathBuf,
    remote: Remote,
    ttl: Duration,
    /// What stats and listings of names with a given start said.
    seen: Mutex<HashMap<String, Seen>>,
    /// Directories listed whole, each listing kept compact: a key under
    /// one that the listing did not show is not there (no request to
    /// learn it).
    listed: Mutex<HashMap<String, Arc<Listed>>>,
    /// Entries in `listed`.
    kept: AtomicUsize,
    /// Directories of which only the names starting with some text were
    /// listed (a lookup in a directory never listed whole), by (directory,
    /// text), and when that listing started and ended: a key under one
    /// that it did not show is not there.
    started: Mutex<HashMap<(String, String), (Instant, Instant)>>,
    /// Directories one listing page does not answer for: more than a page
    /// of entries, or a store that lists no pages (at most [`PRUNE_AT`]).
    big: Mutex<std::collections::HashSet<String>>,
    /// One listing of a directory (or of its names starting with a text)
    /// at a time: the threads probing a directory's entries all miss at
    /// once when its listing expires.
    listing: Mutex<HashMap<String, Gate>>,
    /// Owner and modes of what is shown (`-o uid=,gid=,file_mode=,dir_mode=`).
    perms: Shown,
    mounted: Time,
}

impl RemoteTree {
    /// The tree of `remote`, whose location reads `url`; what a listing
    /// says is trusted for `ttl`.
    pub fn new(remote: Remote, url: &str, ttl: Duration) -> RemoteTree {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        RemoteTree {
            root: PathBuf::from(url.trim_end_matches('/')),
            remote,
            ttl,
            seen: Mutex::new(HashMap::new()),
            kept: AtomicUsize::new(0),
            listed: Mutex::new(HashMap::new()),
            started: Mutex::new(HashMap::new()),
            big: Mutex::default(),
            listing: Mutex::new(HashMap::new()),
            perms: Shown::of(Perms::default()),
            mounted: Time {
                sec: now.as_secs() as i64,
                nsec: now.subsec_nanos() as i64,
            },
        }
    }

    /// The same, its entries owned and with modes as `perms` says (the
    /// mounting user's ids, files 0444 and directories 0555 where it says
    /// nothing).
    pub fn with_perms(self, perms: Perms) -> RemoteTree {
        RemoteTree {
            perms: Shown::of(perms),
            ..self
        }
    }

    /// The store this tree reads (its request counters).
    pub fn remote(&self) -> &Remote {
        &self.remote
    }

    /// The key of `path` relative to the location ("" for the root).
    fn key(&self, path: &Path) -> std::io::Result<String> {
        let rel = path.strip_prefix(&self.root).map_err(|_| enoent())?;
        let parts: Vec<&str> = rel
            .components()
            .map(|c| c.as_os_str().to_str().ok_or_else(enoent))
            .collect::<std::io::Result<_>>()?;
        Ok(parts.join("/"))
    }

    /// Forget what listings said of `key` and its directory.
    fn forget(&self, key: &str) {
        self.seen.lock().remove(key);
        let parent = key.rsplit_once('/').map_or("", |(p, _)| p);
        if let Some(l) = self.listed.lock().remove(parent) {
            self.kept.fetch_sub(l.len(), Ordering::Relaxed);
        }
        self.started.lock().retain(|(dir, _), _| dir != parent);
    }

    /// What `key` is: from a listing still trusted; else from a fresh
    /// listing of its directory (one request answers a lookup's every
    /// candidate name, and a directory's every entry) or, in a directory
    /// never listed whole, of the names sharing its name's start (up to
    /// its first `.`: every candidate name of one lookup); else asked.
    fn node(&self, key: &str) -> std::io::Result<Node> {
        if key.is_empty() {
            return Ok(Node::Dir);
        }
        let (parent, name) = key.rsplit_once('/').unwrap_or(("", key));
        let start = name.split('.').next().filter(|s| !s.is_empty());
        // A listing that ended after this is what this lookup asked for,
        // however short `metadata_ttl`.
        let mut asked = None;
        for attempt in 0..2 {
            if let Some(s) = self.seen.lock().get(key) {
                if s.at.elapsed() < self.ttl {
                    return Ok(s.node.clone());
                }
            }
            if let Some(l) = self.kept(parent, asked) {
                return l.get(parent, name).ok_or_else(enoent);
            }
            if let Some(since) = start.and_then(|s| self.started_since(parent, s, asked)) {
                // What that listing said, even if it was made between the
                // look above and this one (by another thread).
                return match self.seen.lock().get(key) {
                    Some(s) if s.at >= since => Ok(s.node.clone()),
                    _ => Err(enoent()),
                };
            }
            asked = Some(Instant::now());
            if attempt == 0 && self.list_for(parent, start).is_err() {
                break;
            }
        }
        let node = match self.remote.stat(key).inspect_err(logged) {
            Ok(Entry::Dir) => Node::Dir,
            Ok(Entry::Object(o)) => Node::Object(o),
            Err(e) => {
                self.seen.lock().remove(key);
                return Err(e);
            }
        };
        self.remember(key.to_string(), node.clone());
        Ok(node)
    }

    /// The object at `path`, if it is still the version `meta` describes.
    fn object_as(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Object> {
        let key = self.key(path).map_err(|e| err_in(e, path))?;
        match self.node(&key).map_err(|e| err_in(e, path))? {
            Node::Object(o) if inode_of(&key, Some(version_of(&o))) == meta.ino => Ok(o),
            _ => Err(
                blosc_decode::Error::changed("replaced since it was looked up: not opened")
                    .in_file(path),
            ),
        }
    }

    fn meta_of(&self, key: &str, node: &Node) -> Meta {
        let (kind, len, mode, nlink, version, mtime, pinned) = match node {
            Node::Dir => (
                EntryKind::Dir,
                0,
                libc::S_IFDIR | self.perms.dir_mode,
                2,
                None,
                None,
                true,
            ),
            Node::Object(o) => (
                EntryKind::File,
                o.len,
                libc::S_IFREG | self.perms.file_mode,
                1,
                Some(version_of(o)),
                o.mtime,
                o.pinned(),
            ),
        };
        let mtime = mtime.map(time_of).unwrap_or(self.mounted);
        Meta {
            kind,
            len,
            ino: inode_of(key, version),
            dev: 0,
            mode,
            uid: self.perms.uid,
            gid: self.perms.gid,
            nlink,
            blocks: len.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            born: None,
            pinned,
        }
    }

    /// The files of the sparse frame under `key`: one listing of its
    /// prefix (the one its probe made, while it is trusted).
    fn frame_files(&self, key: &str, path: &Path) -> std::io::Result<RemoteFrame> {
        Ok(RemoteFrame {
            path: path.to_path_buf(),
            remote: self.remote.clone(),
            objects: self.whole(key)?.objects(key),
        })
    }
}

/// The version of an object: its ETag, or else its length and time.
fn version_of(o: &Object) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match &o.etag {
        Some(e) => e.hash(&mut h),
        None => (o.len, o.mtime).hash(&mut h),
    }
    h.finish()
}

/// An inode number for `key` (and the object's version: a replaced object
/// is a new file, as a local file replaced by a rename is).
fn inode_of(key: &str, version: Option<u64>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    version.hash(&mut h);
    h.finish() & !(1 << 63)
}

fn time_of(t: SystemTime) -> Time {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Time {
            sec: d.as_secs() as i64,
            nsec: d.subsec_nanos() as i64,
        },
        Err(_) => Time::default(),
    }
}

/// Log a remote store's failure (its text says which request failed and
/// why; the error keeps its errno for the reply): at debug level when it
/// says "not there", an everyday answer.
fn logged(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::NotFound {
        log::debug!("{e}");
    } else {
        log::warn!("{e}");
    }
}

fn enoent() -> std::io::Error {
    std::io::Error::from(Error::not_found())
}

fn err_in(e: std::io::Error, path: &Path) -> blosc_decode::Error {
    blosc_decode::Error::from(e).in_file(path)
}

impl SourceTree for RemoteTree {
    fn root(&self) -> &Path {
        &self.root
    }

    fn hides(&self, _path: &Path) -> bool {
        false
    }

    fn list(&self, dir: &Path) -> std::io::Result<Vec<OsString>> {
        Ok(self.whole(&self.key(dir)?)?.names())
    }

    fn stat(&self, path: &Path) -> std::io::Result<Meta> {
        let key = self.key(path)?;
        let node = self.node(&key)?;
        Ok(self.meta_of(&key, &node))
    }

    fn stat_follow(&self, path: &Path) -> std::io::Result<Meta> {
        self.stat(path)
    }

    fn read_link(&self, _path: &Path) -> std::io::Result<PathBuf> {
        Err(std::io::Error::from(Error::invalid()))
    }

    fn probe(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Option<Probe>> {
        if meta.is_dir() {
            let index = path.join(SFRAME_INDEX);
            let Ok(im) = self.stat(&index) else {
                return Ok(None);
            };
            if !im.is_file() {
                return Ok(None);
            }
            let o = self.object_as(&index, &im)?;
            return detect::probe_sframe_index(self.remote.open(&o), path);
        }
        let o = self.object_as(path, meta)?;
        detect::probe_source(self.remote.open(&o), path)
    }

    /// An object a trusted listing does not describe is asked for by its
    /// key (a GET of what its reader reads `first`), not found by listing
    /// its directory. Either way no more is fetched with the open.
    fn open_file(
        &self,
        path: &Path,
        first: First,
    ) -> blosc_decode::Result<Option<Arc<dyn Source>>> {
        let key = self.key(path).map_err(|e| err_in(e, path))?;
        let parent = key.rsplit_once('/').map_or("", |(p, _)| p);
        let seen = self
            .seen
            .lock()
            .get(&key)
            .map(|s| s.at.elapsed() < self.ttl);
        let src = if seen == Some(true) || self.kept(parent, None).is_some() {
            let Some(md) = stat_file(self, path)? else {
                return Ok(None);
            };
            self.remote.open(&self.object_as(path, &md)?)
        } else {
            let Some(src) = self
                .remote
                .open_object(&key, first)
                .map_err(|e| err_in(e, path))?
            else {
                return Ok(None);
            };
            self.remember(key, Node::Object(src.object().clone()));
            src
        };
        src.prefetch_first(first).map_err(|e| e.in_file(path))?;
        Ok(Some(src))
    }

    fn open_source(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Arc<dyn Source>> {
        let o = self.object_as(path, meta)?;
        let src = self.remote.open(&o);
        src.prefetch_open().map_err(|e| e.in_file(path))?;
        Ok(src)
    }

    fn open_container(
        &self,
        path: &Path,
        meta: &Meta,
        env: &Env,
    ) -> blosc_decode::Result<Option<Container>> {
        let key = self.key(path).map_err(|e| err_in(e, path))?;
        if meta.is_dir() {
            let files = self.frame_files(&key, path).map_err(|e| err_in(e, path))?;
            if !files.objects.contains_key(SFRAME_INDEX) {
                return Ok(None);
            }
            return blosc_decode::open::open_sframe(&files, env);
        }
        let o = self.object_as(path, meta)?;
        let src = self.remote.open(&o);
        match src.prefetch_open() {
            // Replaced since it was listed: what was kept of it goes, and
            // ESTALE has the kernel look the name up again (and find the
            // new version) instead of failing the open.
            Err(e) if e.kind == blosc_decode::ErrorKind::Changed => {
                self.forget(&key);
                log::debug!("{}: {e}", path.display());
                return Err(Error::stale()
                    .in_source("replaced since it was listed")
                    .in_file(path));
            }
            r => r.map_err(|e| e.in_file(path))?,
        }
        blosc_decode::open::open_source(src, path, env)
    }

    fn open_plain(&self, path: &Path) -> std::io::Result<(Box<dyn RawFile>, Meta)> {
        let key = self.key(path)?;
        match self.node(&key)? {
            Node::Object(o) => {
                let meta = self.meta_of(&key, &Node::Object(o.clone()));
                let obj = self.remote.open(&o);
                Ok((
                    Box::new(RemoteRaw {
                        obj,
                        meta: meta.clone(),
                    }),
                    meta,
                ))
            }
            Node::Dir => Err(std::io::Error::from(Error::is_dir())),
        }
    }

    fn dir_container_access(&self, path: &Path, _meta: &Meta) -> (u16, u64) {
        let Ok(key) = self.key(path) else {
            return (0, 0);
        };
        // From the kept listing: attributes are asked often.
        let mode = self.perms.file_mode as u16;
        self.whole(&key).map_or((0, 0), |l| (mode, l.blocks))
    }

    fn statfs(&self) -> std::io::Result<Statfs> {
        Ok(Statfs {
            blocks: 0,
            bfree: 0,
            bavail: 0,
            files: 0,
            ffree: 0,
            bsize: 4096,
            namelen: 1024,
            frsize: 4096,
        })
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.remote.stats();
        vec![
            ("remote_gets", s.gets),
            ("remote_lists", s.lists),
            ("remote_bytes", s.bytes),
            ("remote_retries", s.retries),
            ("remote_errors", s.errors),
        ]
    }

    fn listing_workers(&self, entries: usize) -> usize {
        // Each probe waits for a round trip: many at once.
        entries.div_ceil(4).clamp(1, 32)
    }
}
