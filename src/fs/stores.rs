//! python-blosc2's zipped stores (`.b2z`) as directories: [`StoreTree`]
//! wraps the source tree and presents each `.b2z` file that is a zip
//! archive as a directory of its members (`grp/b.b2nd` is the file `b.b2nd`
//! in the directory `grp`). The presented tree then names and opens members
//! like any other file (`b.b2nd` is shown as `b.npy`); a member's bytes are
//! read in place, at their offset in the archive. A member not stored as
//! its own bytes is listed, and its opens fail (EIO) with a log line.

use super::source_tree::{EntryKind, Meta, RawFile, SourceTree};
use super::Statfs;
use blosc_decode::container::{Container, Env};
use blosc_decode::detect::{self, Probe};
use blosc_decode::format::zip::Member;
use blosc_decode::io::{Source, Stamp, Window};
use blosc_decode::open::store;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The suffix of the files presented as store directories.
const STORE_SUFFIX: &[u8] = b".b2z";

/// Stores kept parsed, at most (the map is emptied past it).
const MAX_KEPT: usize = 1024;

/// One archive's members as a tree.
struct Store {
    /// The archive file as stat'ed when it was read.
    meta: Meta,
    members: Vec<Member>,
    /// Member index by path inside the archive.
    files: HashMap<PathBuf, usize>,
    /// The names in each directory (`""`: the archive's top).
    dirs: HashMap<PathBuf, BTreeSet<OsString>>,
}

/// Where a path inside a store leads.
enum Node {
    Dir,
    File(usize),
}

impl Store {
    /// The tree of `members`; names that cannot be paths inside the
    /// directory (absolute, `..`, empty parts) are left out, with a log line.
    fn new(meta: Meta, members: Vec<Member>, path: &Path) -> Store {
        let mut s = Store {
            meta,
            members: Vec::new(),
            files: HashMap::new(),
            dirs: HashMap::from([(PathBuf::new(), BTreeSet::new())]),
        };
        for m in members {
            let Some(rel) = member_path(&m.name) else {
                log::warn!(
                    "{}: member {:?} is not a relative path: not presented",
                    path.display(),
                    String::from_utf8_lossy(&m.name)
                );
                continue;
            };
            let is_dir = m.name.ends_with(b"/");
            s.add_parents(&rel, is_dir);
            if !is_dir && !s.dirs.contains_key(&rel) {
                s.files.insert(rel, s.members.len());
                s.members.push(m);
            }
        }
        s
    }

    /// Enter `rel` in its parent directory and every parent in its own.
    fn add_parents(&mut self, rel: &Path, is_dir: bool) {
        if is_dir {
            self.dirs.entry(rel.to_path_buf()).or_default();
        }
        let mut child = rel;
        while let (Some(parent), Some(name)) = (child.parent(), child.file_name()) {
            self.dirs
                .entry(parent.to_path_buf())
                .or_default()
                .insert(name.to_os_string());
            child = parent;
        }
    }

    fn node(&self, rel: &Path) -> Option<Node> {
        if self.dirs.contains_key(rel) {
            return Some(Node::Dir);
        }
        self.files.get(rel).map(|&i| Node::File(i))
    }

    /// The metadata presented for `rel`: the archive's, with a kind, size
    /// and inode number of its own.
    fn meta_of(&self, rel: &Path, node: &Node) -> Meta {
        let mut md = self.meta.clone();
        if !rel.as_os_str().is_empty() {
            md.ino = mix(md.ino, rel.as_os_str().as_bytes());
        }
        match node {
            Node::Dir => {
                md.kind = EntryKind::Dir;
                md.mode = libc::S_IFDIR | (md.mode & 0o777) | ((md.mode & 0o444) >> 2);
                md.len = 0;
                md.nlink = 2;
                md.blocks = 0;
            }
            Node::File(i) => {
                let m = &self.members[*i];
                md.kind = EntryKind::File;
                md.mode = libc::S_IFREG | (md.mode & 0o777);
                md.len = m.size;
                md.nlink = 1;
                md.blocks = m.compressed.div_ceil(512);
            }
        }
        md
    }
}

/// A member's name as a relative path, if it is one.
fn member_path(name: &[u8]) -> Option<PathBuf> {
    let trimmed = name.strip_suffix(b"/").unwrap_or(name);
    let p = Path::new(OsStr::from_bytes(trimmed));
    let plain = !trimmed.is_empty()
        && !trimmed.contains(&0)
        && !trimmed.split(|&b| b == b'/').any(|c| c.is_empty())
        && p.components().all(|c| matches!(c, Component::Normal(_)));
    plain.then(|| p.to_path_buf())
}

/// An inode number for a path inside an archive: FNV-1a of the path mixed
/// into the archive's inode number.
fn mix(ino: u64, path: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in path {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    ino ^ h.rotate_left(17) ^ (1 << 61)
}

/// A store read at a version of its file (`None`: not a readable archive,
/// passed through as a file).
type Kept = (Stamp, Option<Arc<Store>>);

/// The source tree with `.b2z` stores shown as directories.
pub struct StoreTree {
    inner: Arc<dyn SourceTree>,
    /// Parsed stores by path.
    kept: Mutex<HashMap<PathBuf, Kept>>,
}

impl StoreTree {
    pub fn new(inner: Arc<dyn SourceTree>) -> StoreTree {
        StoreTree {
            inner,
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// The store `path` leads into, with the path inside it; `None` for a
    /// path that is not in a store (nor a store itself).
    fn locate(&self, path: &Path) -> Option<(PathBuf, Arc<Store>, PathBuf)> {
        let rel = path.strip_prefix(self.inner.root()).ok()?;
        let mut at = self.inner.root().to_path_buf();
        let mut parts = rel.components();
        while let Some(c) = parts.next() {
            at.push(c);
            if !c.as_os_str().as_bytes().ends_with(STORE_SUFFIX) {
                continue;
            }
            if let Some(s) = self.store(&at) {
                return Some((at, s, parts.as_path().to_path_buf()));
            }
            return None;
        }
        None
    }

    /// The store that the file at `path` is, read once per version.
    fn store(&self, path: &Path) -> Option<Arc<Store>> {
        let md = self.inner.stat(path).ok().filter(Meta::is_file)?;
        let stamp = md.stamp();
        if let Some((s, st)) = self.kept.lock().get(path) {
            if *s == stamp {
                return st.clone();
            }
        }
        let read = self
            .inner
            .open_source(path, &md)
            .and_then(|src| store::members(src.as_ref()));
        let st = match read {
            Ok(members) => Some(Arc::new(Store::new(md, members, path))),
            Err(e) => {
                log::warn!(
                    "{}: not read as a store ({e}): passed through as a file",
                    path.display()
                );
                None
            }
        };
        let mut kept = self.kept.lock();
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert(path.to_path_buf(), (stamp, st.clone()));
        st
    }

    /// The member at `path`, with the archive's source; `Ok(None)` for a
    /// path that is not a member.
    fn member(&self, path: &Path) -> blosc_decode::Result<Option<(Window, Meta)>> {
        let Some((at, s, rel)) = self.locate(path) else {
            return Ok(None);
        };
        let Some(Node::File(i)) = s.node(&rel) else {
            return Ok(None);
        };
        let src = self.inner.open_source(&at, &s.meta)?;
        let w = store::member_source(src, &s.members[i], &at)?;
        Ok(Some((w, s.meta_of(&rel, &Node::File(i)))))
    }

    /// The metadata of a path in a store (the store itself a directory).
    fn virtual_stat(&self, path: &Path) -> Option<std::io::Result<Meta>> {
        let (_, s, rel) = self.locate(path)?;
        Some(match s.node(&rel) {
            Some(n) => Ok(s.meta_of(&rel, &n)),
            None => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
        })
    }
}

/// A member read as its raw bytes.
struct MemberFile {
    src: Window,
    meta: Meta,
}

impl RawFile for MemberFile {
    fn meta(&self) -> std::io::Result<Meta> {
        Ok(self.meta.clone())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        super::source_tree::read_clipped(&self.src, buf, offset)
    }

    fn lseek(&self, offset: i64, whence: i32) -> Result<i64, i32> {
        super::source_tree::lseek_whole(self.src.len(), offset, whence)
    }
}

impl SourceTree for StoreTree {
    fn root(&self) -> &Path {
        self.inner.root()
    }

    fn hides(&self, path: &Path) -> bool {
        self.inner.hides(path)
    }

    fn list(&self, dir: &Path) -> std::io::Result<Vec<OsString>> {
        match self.locate(dir) {
            Some((_, s, rel)) => s
                .dirs
                .get(&rel)
                .map(|names| names.iter().cloned().collect())
                .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOTDIR)),
            None => self.inner.list(dir),
        }
    }

    fn stat(&self, path: &Path) -> std::io::Result<Meta> {
        self.virtual_stat(path)
            .unwrap_or_else(|| self.inner.stat(path))
    }

    fn stat_follow(&self, path: &Path) -> std::io::Result<Meta> {
        self.virtual_stat(path)
            .unwrap_or_else(|| self.inner.stat_follow(path))
    }

    fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
        match self.locate(path) {
            Some(_) => Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
            None => self.inner.read_link(path),
        }
    }

    fn probe(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Option<Probe>> {
        if self.locate(path).is_none() {
            return self.inner.probe(path, meta);
        }
        match self.member(path) {
            Ok(Some((w, _))) => detect::probe_source(Arc::new(w), path),
            // Not a member (a directory), or one not stored: not a
            // container (its opens say why).
            Ok(None) | Err(_) => Ok(None),
        }
    }

    fn open_container(
        &self,
        path: &Path,
        meta: &Meta,
        env: &Env,
    ) -> blosc_decode::Result<Option<Container>> {
        if self.locate(path).is_none() {
            return self.inner.open_container(path, meta, env);
        }
        match self.member(path)? {
            Some((w, _)) => detect::open_source(Arc::new(w), path, env),
            None => Ok(None),
        }
    }

    fn open_plain(&self, path: &Path) -> std::io::Result<(Box<dyn RawFile>, Meta)> {
        if self.locate(path).is_none() {
            return self.inner.open_plain(path);
        }
        match self.member(path) {
            Ok(Some((src, meta))) => Ok((
                Box::new(MemberFile {
                    src,
                    meta: meta.clone(),
                }),
                meta,
            )),
            Ok(None) => Err(std::io::Error::from_raw_os_error(libc::EISDIR)),
            Err(e) => {
                log::warn!("{}: {e}", path.display());
                Err(std::io::Error::from_raw_os_error(e.errno()))
            }
        }
    }

    fn open_source(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Arc<dyn Source>> {
        match self.member(path)? {
            Some((w, _)) => Ok(Arc::new(w)),
            None => self.inner.open_source(path, meta),
        }
    }

    fn dir_container_access(&self, path: &Path, meta: &Meta) -> (u16, u64) {
        match self.locate(path) {
            Some(_) => (0, 0),
            None => self.inner.dir_container_access(path, meta),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_names_that_are_paths() {
        assert_eq!(member_path(b"a/b.b2nd"), Some(PathBuf::from("a/b.b2nd")));
        assert_eq!(member_path(b"grp/"), Some(PathBuf::from("grp")));
        for bad in [
            &b""[..],
            b"/",
            b"/etc/passwd",
            b"../x",
            b"a/../b",
            b"a//b",
            b"./a",
            b"a\0b",
        ] {
            assert_eq!(member_path(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
