//! Lookups, attributes and inode lifetimes (the presented tree's side;
//! the source's is `source_tree.rs`).

use super::*;

/// The `st_blksize` a file shows: readers size their buffers by it.
/// A container's is one page: Python's `open` (as `np.load` uses it)
/// reads the 128-byte `.npy` header in one buffer of this size, and the
/// kernel's first read-ahead window follows the size of that read (16 KiB
/// for 4 KiB, 256 KiB for 128 KiB): a larger buffer has the header's read
/// decode blocks of data nobody asked for. Large reads (`np.load`'s
/// whole-array read, `cat` and `cp`, whose buffers are at least 128 KiB
/// whatever the file says) are not affected, and the kernel's read-ahead
/// still sends requests of the mount's read-ahead to a sequential reader.
/// Other files keep 128 KiB.
fn blksize(what: &Shown) -> u32 {
    match what {
        Shown::Container(_) => 4096,
        _ => 128 * 1024,
    }
}

impl Fs {
    pub(super) fn attr_of(&self, ino: u64, what: &Shown, md: &Meta, path: &Path) -> Attr {
        let (kind, size, blocks, perm) = match what {
            Shown::Dir => (Kind::Dir, md.len, md.blocks, (md.mode & 0o555) as u16),
            // The length of the target `readlink` gives.
            Shown::Symlink => {
                let len = self
                    .tree
                    .read_link(path)
                    .ok()
                    .and_then(|t| self.presented_target(path, t.as_os_str().as_bytes()))
                    .map_or(md.len, |t| t.len() as u64);
                (Kind::Symlink, len, md.blocks, 0o777)
            }
            Shown::Plain => (Kind::File, md.len, md.blocks, (md.mode & 0o555) as u16),
            Shown::Container(p) if md.is_dir() => {
                // No wider than the directory and every file it exposes
                // (the directory at `path` checked to be the one `md`
                // describes: nothing readable if it is not).
                let (perm, blocks) = self.tree.dir_container_access(path, md);
                (Kind::File, p.len, blocks, perm)
            }
            Shown::Container(p) => (Kind::File, p.len, md.blocks, (md.mode & 0o555) as u16),
        };
        let t = |t: Time| {
            if t.sec >= 0 {
                UNIX_EPOCH + Duration::new(t.sec as u64, t.nsec as u32)
            } else {
                UNIX_EPOCH
            }
        };
        Attr {
            ino,
            kind,
            size,
            blocks,
            atime: t(md.atime),
            mtime: t(md.mtime),
            ctime: t(md.ctime),
            perm,
            nlink: if kind == Kind::Dir {
                md.nlink as u32
            } else {
                1
            },
            uid: md.uid,
            gid: md.gid,
            blksize: blksize(what),
        }
    }

    /// The source path presented as `name` in directory `parent`, and
    /// whether the listing it came from saw a container there (`None`: not
    /// from a listing). Without a valid listing at hand only the few source
    /// names that could be presented as `name` are looked at
    /// ([`names::resolve`]): the first lookup in a large directory does not
    /// wait for every file in it to be probed.
    fn source_of(&self, parent: u64, name: &OsStr) -> Result<(PathBuf, Option<bool>), Error> {
        // Not entries of any listing, and not to be joined to a path.
        if name.is_empty() || name == "." || name == ".." || name.as_bytes().contains(&b'/') {
            return Err(Error::not_found());
        }
        let dir = self.path_of(parent)?;
        let listed = |l: &DirListing| {
            let e = l.find(name).ok_or_else(Error::not_found)?;
            let (src, what) = (&e.source, &e.what);
            Ok((dir.join(src), Some(what.is_container())))
        };
        if let (_, Some(l)) = self.cached_listing(parent, &dir)? {
            return listed(&l);
        }
        // A probe that ran out of descriptors, or a source that cannot
        // answer (a remote store down): the lookup fails with that, not
        // ENOENT, and looks at no other name.
        let mut failed = None;
        let look = |src: &OsStr| {
            let p = dir.join(src);
            if failed.is_some() || self.tree.hides(&p) {
                return None;
            }
            let md = match self.tree.stat(&p).map_err(Error::from) {
                Ok(md) => md,
                Err(e) if e.unanswered() => {
                    failed = Some(e);
                    return None;
                }
                Err(_) => return None,
            };
            if !presented(&md) {
                return None;
            }
            match self.classify(&p, &md) {
                Ok(w) => Some(naming(&w)),
                Err(e) => {
                    failed = Some(e);
                    None
                }
            }
        };
        let found = names::resolve(name, look);
        if let Some(e) = failed {
            return Err(e);
        }
        match found {
            Ok(found) => Ok((dir.join(found.ok_or_else(Error::not_found)?), None)),
            Err(()) => listed(&*self.listing(parent)?),
        }
    }

    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Attr, Error> {
        for attempt in 0..2 {
            let (path, listed) = self.source_of(parent, name)?;
            if self.tree.hides(&path) {
                return Err(Error::not_found());
            }
            // Attributes are always fresh; the listing only maps the name.
            let md = match self.tree.stat(&path) {
                Ok(md) => md,
                Err(_) if attempt == 0 => {
                    self.listings.remove(parent);
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let what = self.classify(&path, &md)?;
            if attempt == 0 && listed.is_some_and(|c| c != what.is_container()) {
                // Became (or stopped being) a container in place: names change.
                self.listings.remove(parent);
                continue;
            }
            let ino = self.ino_for(&md);
            let attr = self.attr_of(ino, &what, &md, &path);
            self.inodes.looked_up([(ino, path)], parent);
            return Ok(attr);
        }
        Err(Error::not_found())
    }

    /// What `ino` is now (re-read from the source; `ESTALE` as
    /// [`Fs::source_md`]).
    pub(super) fn what_of(&self, ino: u64) -> Result<(PathBuf, Shown, Meta), Error> {
        let path = self.path_of(ino)?;
        let md = self.source_md(ino, &path)?;
        let what = if ino == ROOT_INO {
            Shown::Dir
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
    pub(super) fn source_md(&self, ino: u64, path: &Path) -> Result<Meta, Error> {
        if ino != ROOT_INO && self.tree.hides(path) {
            return Err(Error::stale());
        }
        let md = self.tree.stat(path).map_err(|e| match Error::from(e) {
            e if e.is_not_found() && ino != ROOT_INO => Error::stale(),
            e => e,
        })?;
        if ino != ROOT_INO && self.ino_for(&md) != ino {
            return Err(Error::stale());
        }
        Ok(md)
    }

    pub fn getattr(&self, ino: u64) -> Result<Attr, Error> {
        let (path, what, md) = self.what_of(ino)?;
        Ok(self.attr_of(ino, &what, &md, &path))
    }

    /// `getattr` asked through an open handle (`fstat`): once the source
    /// path is gone or names another file, the attributes the file had
    /// when this handle opened it (the handle still reads that version or
    /// fails), not an error.
    pub fn getattr_open(&self, ino: u64, fh: Option<u64>) -> Result<Attr, Error> {
        match self.getattr(ino) {
            Err(e) if e.is_stale() || e.is_not_found() => {
                fh.and_then(|fh| self.handles.attr(fh)).ok_or(e)
            }
            r => r,
        }
    }

    /// The kernel forgets `n` lookups of `ino`: at none left, the node goes.
    pub fn forget(&self, ino: u64, n: u64) {
        if self.inodes.forget(ino, n) {
            self.handles.forget_ino(ino);
        }
    }

    /// How many inodes the kernel holds (tests: `forget` empties it).
    pub fn nodes_held(&self) -> usize {
        self.inodes.held()
    }
}
