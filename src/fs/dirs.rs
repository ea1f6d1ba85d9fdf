//! Open directories: a listing taken at `opendir` and served by offset.
//!
//! A directory is read in many requests (a few hundred entries each). Each
//! request is answered from the listing its handle took, by index, so a
//! read of n entries costs O(n) however large the directory, offsets stay
//! valid while the source directory changes, and the listing is not built
//! again halfway through. Reading from offset 0 again (`rewinddir`) takes a
//! fresh listing.
//!
//! With `readdirplus` each entry carries its attributes and counts as a
//! lookup, so `ls -l` needs no request per entry to stat it.

use super::*;

/// An open directory.
pub(super) struct DirHandle {
    ino: u64,
    listing: Mutex<Arc<DirListing>>,
}

/// One entry as a directory read presents it.
pub struct DirItem<'a> {
    pub ino: u64,
    pub kind: Kind,
    pub name: &'a OsStr,
    /// The offset of the entry after this one.
    pub next: u64,
    /// With `readdirplus`: the entry's attributes.
    pub attr: Option<Attr>,
}

/// Offsets 1 and 2 are `.` and `..`; entry `i` of a listing is at `i + 3`.
const FIRST: u64 = 2;

impl Fs {
    /// Open directory `ino`: its listing is taken now.
    pub fn opendir(&self, ino: u64) -> Result<u64, Error> {
        let listing = self.listing(ino)?;
        Ok(self.handles.add_dir(DirHandle {
            ino,
            listing: Mutex::new(listing),
        }))
    }

    pub fn releasedir(&self, fh: u64) {
        self.handles.remove_dir(fh);
    }

    /// Entries of open directory `fh` from `offset` on, given to `add`
    /// until it returns `true` (full: that entry was not taken). With
    /// `plus`, each entry has its attributes and each one taken (other
    /// than `.` and `..`) is a lookup the kernel will `forget`.
    pub fn readdir_at(
        &self,
        fh: u64,
        offset: u64,
        plus: bool,
        mut add: impl FnMut(DirItem) -> bool,
    ) -> Result<(), Error> {
        let h = self.handles.dir(fh)?;
        let l = if offset == 0 {
            let fresh = self.listing(h.ino)?;
            *h.listing.lock() = fresh.clone();
            fresh
        } else {
            h.listing.lock().clone()
        };
        let dir = self.path_of(h.ino)?;
        let parent = self.inodes.parent_of(h.ino);
        for (off, ino, name) in [(0, h.ino, "."), (1, parent, "..")] {
            if offset <= off {
                let attr = plus.then(|| self.dot_attr(ino));
                let item = DirItem {
                    ino,
                    kind: Kind::Dir,
                    name: OsStr::new(name),
                    next: off + 1,
                    attr,
                };
                if add(item) {
                    return Ok(());
                }
            }
        }
        let start = offset.saturating_sub(FIRST) as usize;
        let mut looked = Vec::new();
        for (i, e) in l.entries.iter().enumerate().skip(start) {
            let (presented, src, what, md) = (&e.shown, &e.source, &e.what, &e.md);
            let ino = self.ino_for(md);
            let path = plus.then(|| dir.join(src));
            let attr = path.as_ref().map(|p| self.attr_of(ino, what, md, p));
            let item = DirItem {
                ino,
                kind: kind_of(what),
                name: presented,
                next: i as u64 + FIRST + 1,
                attr,
            };
            if add(item) {
                break;
            }
            if let Some(p) = path {
                looked.push((ino, p));
            }
        }
        self.inodes.looked_up(looked, h.ino);
        Ok(())
    }

    /// Attributes given with `.` and `..` in `readdirplus` (the kernel
    /// takes neither as a lookup, nor uses them beyond the inode number).
    fn dot_attr(&self, ino: u64) -> Attr {
        Attr {
            ino,
            kind: Kind::Dir,
            size: 0,
            blocks: 0,
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
            ctime: UNIX_EPOCH,
            perm: 0o555,
            nlink: 2,
            uid: 0,
            gid: 0,
            blksize: 128 * 1024,
        }
    }

    /// How many listings were built from the source so far.
    pub fn listings_built(&self) -> u64 {
        self.listings.built()
    }

    /// How many files were probed so far.
    pub fn probes_run(&self) -> u64 {
        self.probes.run()
    }

    /// Entries of directory `ino` (with `.` and `..`), read whole.
    pub fn readdir(&self, ino: u64) -> Result<Vec<DirEntry>, Error> {
        let fh = self.opendir(ino)?;
        let mut out = Vec::new();
        let r = self.readdir_at(fh, 0, false, |e| {
            out.push(DirEntry {
                ino: e.ino,
                kind: e.kind,
                name: e.name.to_owned(),
            });
            false
        });
        self.releasedir(fh);
        r.map(|()| out)
    }
}

/// The kind of node an entry is presented as.
fn kind_of(w: &Shown) -> Kind {
    match w {
        Shown::Dir => Kind::Dir,
        Shown::Symlink => Kind::Symlink,
        Shown::Plain | Shown::Container(_) => Kind::File,
    }
}
