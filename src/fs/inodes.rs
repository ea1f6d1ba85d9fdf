//! Inodes: the presented inode numbers, the source path each stands for,
//! and the lookups the kernel holds on them.

use super::*;

struct Node {
    /// Source path.
    path: PathBuf,
    parent: u64,
    /// Lookups the kernel has not forgotten yet (`forget`): at zero the
    /// node is dropped. (Inode numbers follow file identities, so every
    /// file a churning source ever held would otherwise stay here.)
    lookups: u64,
}

/// The inodes the kernel knows, under one lock.
pub(super) struct Inodes {
    root: PathBuf,
    root_dev: u64,
    nodes: RwLock<HashMap<u64, Node>>,
}

impl Inodes {
    /// The inodes of a tree presenting `root` (canonical): only the root's.
    pub(super) fn new(root: PathBuf, root_dev: u64) -> Inodes {
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT_INO,
            Node {
                path: root.clone(),
                parent: ROOT_INO,
                lookups: 1,
            },
        );
        Inodes {
            root,
            root_dev,
            nodes: RwLock::new(nodes),
        }
    }

    /// The source directory presented at the root.
    pub(super) fn root(&self) -> &Path {
        &self.root
    }

    pub(super) fn path_of(&self, ino: u64) -> Result<PathBuf, Error> {
        self.nodes
            .read()
            .get(&ino)
            .map(|n| n.path.clone())
            .ok_or_else(Error::not_found)
    }

    /// The directory `ino` was last looked up in (the root for one not held).
    pub(super) fn parent_of(&self, ino: u64) -> u64 {
        self.nodes.read().get(&ino).map_or(ROOT_INO, |n| n.parent)
    }

    /// Is `ino` held, looked up at `path`?
    pub(super) fn holds(&self, ino: u64, path: &Path) -> bool {
        self.nodes.read().get(&ino).is_some_and(|n| n.path == path)
    }

    /// Stable inode number of a source entry: its own inode number, mixed
    /// with the device when it is not the root's and with its birth time
    /// where the file system records one, and never 1. A source inode
    /// number alone names another file once its file is deleted and the
    /// number reused, while the kernel may still hold names (dentries)
    /// leading to it: their requests would reach the new file. With the
    /// birth time, the new file has another number here, and requests
    /// through a stale name find their file gone or replaced
    /// (`Fs::what_of`).
    pub(super) fn ino_for(&self, md: &Meta) -> u64 {
        let mut ino = md.ino;
        if md.dev != self.root_dev {
            ino ^= md.dev.rotate_left(48);
        }
        if let Some(born) = md.born {
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

    /// Count a lookup of each (inode, path) found in directory `parent`.
    pub(super) fn looked_up(&self, found: impl IntoIterator<Item = (u64, PathBuf)>, parent: u64) {
        let mut nodes = self.nodes.write();
        for (ino, path) in found {
            let n = nodes.entry(ino).or_insert_with(|| Node {
                path: PathBuf::new(),
                parent,
                lookups: 0,
            });
            n.path = path;
            n.parent = parent;
            n.lookups += 1;
        }
    }

    /// The kernel forgets `n` lookups of `ino`; whether that was its last
    /// (the node is gone).
    pub(super) fn forget(&self, ino: u64, n: u64) -> bool {
        if ino == ROOT_INO {
            return false;
        }
        let mut nodes = self.nodes.write();
        let Some(node) = nodes.get_mut(&ino) else {
            return false;
        };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups > 0 {
            return false;
        }
        nodes.remove(&ino);
        true
    }

    /// How many inodes other than the root are held.
    pub(super) fn held(&self) -> usize {
        self.nodes.read().len() - 1
    }
}

/// A 64-bit mixing function (splitmix64's finalizer): spreads a birth time
/// over all the bits of an inode number.
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
