//! One store's leaves as a tree of paths: the members of a `.b2z`, and the
//! keys of an EmbedStore (a `.b2e`, or the `embed.b2e` of a DictStore),
//! each key's path being the key without its leading `/`.

use crate::fs::source_tree::{EntryKind, Meta};
use blosc_decode::format::zip::Member;
use blosc_decode::open::embed::EmbedStore;
use std::collections::{BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The name of a DictStore's EmbedStore, in its directory or archive.
pub const EMBED_NAME: &str = "embed.b2e";

/// The suffixes python-blosc2 gives a DictStore's external leaves: an
/// external `/a` is `a.b2nd`, `a.b2f` or `a.b2b`, and hides an embedded `/a`
/// (as it does in python-blosc2, which looks external leaves up first).
pub const EXTERNAL_SUFFIXES: &[&str] = &[".b2nd", ".b2f", ".b2b"];

/// What a leaf reads.
pub enum Leaf {
    /// A zip member, read in place.
    Member(Member),
    /// The entry of this index in the embedded store.
    Embedded(usize),
}

/// One store's leaves as a tree.
pub struct Store {
    /// The file holding the leaves (the archive, the `.b2e`) as stat'ed
    /// when it was read.
    pub meta: Meta,
    pub leaves: Vec<Leaf>,
    /// The embedded store, if there is one and it could be read.
    pub embed: Option<EmbedStore>,
    /// Leaf index by path inside the store.
    files: HashMap<PathBuf, usize>,
    /// The names in each directory (`""`: the store's top).
    pub dirs: HashMap<PathBuf, BTreeSet<OsString>>,
}

/// Where a path inside a store leads.
pub enum Node {
    Dir,
    File(usize),
}

impl Store {
    pub fn new(meta: Meta) -> Store {
        Store {
            meta,
            leaves: Vec::new(),
            embed: None,
            files: HashMap::new(),
            dirs: HashMap::from([(PathBuf::new(), BTreeSet::new())]),
        }
    }

    /// Add the members of an archive; names that cannot be paths inside
    /// the directory (absolute, `..`, empty parts) are left out, with a log
    /// line (`path` names the archive).
    pub fn add_members(&mut self, members: Vec<Member>, path: &Path) {
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
            self.add_parents(&rel, is_dir);
            if !is_dir && !self.dirs.contains_key(&rel) {
                self.files.insert(rel, self.leaves.len());
                self.leaves.push(Leaf::Member(m));
            }
        }
    }

    /// Add the keys of an embedded store where they do not clash with what
    /// the store holds already (an external leaf of the same key, a file
    /// where the key needs a directory): those are left out, with a log
    /// line (`path` names the embedded store).
    pub fn add_embedded(&mut self, e: EmbedStore, path: &Path) {
        for (i, entry) in e.entries.iter().enumerate() {
            let rel = member_path(entry.key.strip_prefix('/').unwrap_or("").as_bytes());
            let Some(rel) = rel.filter(|r| self.free(r)) else {
                log::warn!(
                    "{}: key {:?} is not a free relative path: not presented",
                    path.display(),
                    entry.key
                );
                continue;
            };
            self.add_parents(&rel, false);
            self.files.insert(rel, self.leaves.len());
            self.leaves.push(Leaf::Embedded(i));
        }
        self.embed = Some(e);
    }

    /// Can a leaf be added at `rel`: nothing there nor at an external
    /// leaf's name for it, and no file on the way?
    fn free(&self, rel: &Path) -> bool {
        let taken = |p: &Path| self.files.contains_key(p) || self.dirs.contains_key(p);
        !taken(rel)
            && !external_names(rel).iter().any(|p| taken(p))
            && !rel.ancestors().skip(1).any(|a| self.files.contains_key(a))
    }

    /// Take `rel` out of the tree (the embedded store's own file, once its
    /// keys are shown).
    pub fn hide(&mut self, rel: &Path) {
        if self.files.remove(rel).is_some() {
            if let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) {
                if let Some(names) = self.dirs.get_mut(parent) {
                    names.remove(name);
                }
            }
        }
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

    pub fn node(&self, rel: &Path) -> Option<Node> {
        if self.dirs.contains_key(rel) {
            return Some(Node::Dir);
        }
        self.files.get(rel).map(|&i| Node::File(i))
    }

    /// The bytes the leaf `i` takes: in the file, and stored.
    fn leaf_sizes(&self, i: usize) -> (u64, u64) {
        match &self.leaves[i] {
            Leaf::Member(m) => (m.size, m.compressed),
            Leaf::Embedded(e) => {
                let n = self.embed.as_ref().map_or(0, |s| s.entries[*e].length);
                (n, n)
            }
        }
    }

    /// The metadata presented for `rel`: the store file's, with a kind,
    /// size and inode number of its own.
    pub fn meta_of(&self, rel: &Path, node: &Node) -> Meta {
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
                let (len, stored) = self.leaf_sizes(*i);
                md.kind = EntryKind::File;
                md.mode = libc::S_IFREG | (md.mode & 0o777);
                md.len = len;
                md.nlink = 1;
                md.blocks = stored.div_ceil(512);
            }
        }
        md
    }
}

/// The names an external leaf of the key at `rel` would have.
pub fn external_names(rel: &Path) -> Vec<PathBuf> {
    EXTERNAL_SUFFIXES
        .iter()
        .map(|s| {
            let mut n = rel.as_os_str().to_os_string();
            n.push(s);
            PathBuf::from(n)
        })
        .collect()
}

/// A member's name (or a key without its `/`) as a relative path, if it
/// is one.
pub fn member_path(name: &[u8]) -> Option<PathBuf> {
    let trimmed = name.strip_suffix(b"/").unwrap_or(name);
    let p = Path::new(OsStr::from_bytes(trimmed));
    let plain = !trimmed.is_empty()
        && !trimmed.contains(&0)
        && !trimmed.split(|&b| b == b'/').any(|c| c.is_empty())
        && p.components().all(|c| matches!(c, Component::Normal(_)));
    plain.then(|| p.to_path_buf())
}

/// An inode number for a path inside a store: FNV-1a of the path mixed
/// into the store file's inode number.
pub fn mix(ino: u64, path: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in path {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    ino ^ h.rotate_left(17) ^ (1 << 61)
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
