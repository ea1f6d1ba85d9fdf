//! Opening: containers (through the cache of open ones), and handles.

use super::*;

impl Fs {
    /// Close the descriptors of kept containers no handle holds whose
    /// source file was deleted (its disk space is freed only then); how
    /// many went. The mount calls this every few seconds.
    pub fn release_deleted(&self) -> usize {
        self.containers.drop_idle(|c| c.source_gone())
    }

    /// The container behind `ino`, opened (or reused while its source is
    /// unchanged). `Ok(None)`: the source looks like a container but cannot
    /// be opened as one (one warning); it is not tried again until it
    /// changes.
    pub(super) fn container(
        &self,
        ino: u64,
        path: &Path,
        md: &Meta,
    ) -> Result<Option<Arc<Container>>, Error> {
        let stamp = self.stamp_of(path, md).ok_or_else(Error::not_found)?;
        if self.containers.is_broken(ino, stamp) {
            return Ok(None);
        }
        if let Some(c) = self.containers.get(ino, stamp) {
            return Ok(Some(c));
        }
        // Opening reads the index: done without any lock held.
        let mut opened = None;
        let _ = self.with_fds(|| {
            let r = self.tree.open_container(path, md, &self.env);
            let e = match &r {
                Err(e) if e.kind == blosc_decode::ErrorKind::Io && error::out_of_fds(e.errno()) => {
                    Err(Error::from(e.clone()))
                }
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
            Err(e)
                if matches!(
                    e.kind,
                    blosc_decode::ErrorKind::Io | blosc_decode::ErrorKind::Changed
                ) =>
            {
                // (Running out of descriptors is logged once, by `with_fds`.)
                if !error::out_of_fds(e.errno()) {
                    self.warn_once(&e.to_string(), &e.to_string());
                }
                return Err(e.into());
            }
            Err(e) => {
                self.mark_broken(ino, stamp, path, &e.in_file(path).to_string());
                return Ok(None);
            }
        };
        self.containers.keep(ino, stamp, &c);
        Ok(Some(c))
    }

    /// Drop `c` from the open containers kept for `ino` (not another one
    /// opened since), so the next open of `ino` opens it again.
    pub(super) fn forget_container(&self, ino: u64, c: &Arc<Container>) {
        self.containers.forget(ino, c);
    }

    /// `why` names the file and the reason.
    fn mark_broken(&self, ino: u64, stamp: Stamp, path: &Path, why: &str) {
        self.containers.set_broken(ino, stamp);
        self.warn_once(
            &format!("broken:{}:{stamp:?}", path.display()),
            &format!("{why} (not opened as a container: opens fail with EIO until it changes)"),
        );
    }

    /// Open `ino` for reading: returns a handle and whether the kernel may
    /// keep its page cache (the content is unchanged since it was last open).
    pub fn open(&self, ino: u64, write: bool) -> Result<(u64, bool), Error> {
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
    ) -> Result<(u64, bool), Error> {
        if write {
            return Err(Error::read_only());
        }
        let (path, what, md) = self.what_of(ino)?;
        match &what {
            Shown::Dir => return Err(Error::is_dir()),
            Shown::Symlink => return Err(Error::symlink()),
            _ => {}
        }
        let fresh = self.attr_of(ino, &what, &md, &path);
        if caller.is_some_and(|c| !c.may_read(fresh.perm, fresh.uid, fresh.gid)) {
            return Err(Error::denied());
        }
        let h = match &what {
            // (Directories and links returned above.)
            Shown::Plain | Shown::Dir | Shown::Symlink => {
                let (file, fmd) =
                    self.with_fds(|| self.tree.open_plain(&path).map_err(Error::from))?;
                // The file checked (not a link), not one put in its place since.
                if !fmd.same_file(&md) {
                    return Err(Error::stale());
                }
                Handle::Plain(PlainHandle {
                    file,
                    path: path.clone(),
                    stamp: fmd.stamp(),
                })
            }
            Shown::Container(p) => {
                // One that fails to open: listed as its probe says, and its
                // opens fail (a raw view would be another size than listed).
                let c = self.container(ino, &path, &md)?.ok_or_else(Error::io)?;
                if c.len() != p.len {
                    let stamp = self.stamp_of(&path, &md).ok_or_else(Error::not_found)?;
                    let why = format!(
                        "{}: presents {} bytes but is listed with {}",
                        path.display(),
                        c.len(),
                        p.len
                    );
                    self.forget_container(ino, &c);
                    self.mark_broken(ino, stamp, &path, &why);
                    return Err(Error::io());
                }
                c.prepare_spares();
                let sp = if md.is_dir() {
                    path.join("chunks.b2frame")
                } else {
                    path.clone()
                };
                Handle::Container(ContainerHandle {
                    container: c,
                    stamp_path: sp,
                    stamp: self.stamp_of(&path, &md),
                    ino,
                    stream: Default::default(),
                })
            }
        };
        let attr = fresh;
        let keep = match self.stamp_of(&path, &md) {
            Some(stamp) if self.pinned(&path, &md) => self.handles.opened_unchanged(ino, stamp),
            _ => false,
        };
        let fh = self.handles.add_file(h, attr);
        Ok((fh, keep))
    }

    /// May a handle that serves `path` as raw bytes go on doing so, its
    /// file's metadata now being `md`? Yes while the file is unchanged since
    /// it was opened, or changed but still not a container (a growing log
    /// can be followed). One whose file now looks like a container fails:
    /// the two views of one inode must never meet in the kernel's page
    /// cache, where one read could return pages of both. (A file replaced
    /// by rename is another inode: the handle reads its own.)
    pub(super) fn raw_view_holds(&self, path: &Path, md: &Meta, stamp: Stamp) -> bool {
        md.stamp() == stamp || matches!(self.probe(path, md), Ok(None))
    }

    /// Log once that `path` changed under an open handle (`why`, if any),
    /// and the error its reads fail with until it is reopened (`EIO`).
    pub(super) fn changed_while_open(&self, path: &Path, why: &str) -> Error {
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
        Error::io()
    }

    pub fn release(&self, fh: u64) {
        self.handles.remove_file(fh);
    }

    pub(super) fn handle(&self, fh: u64) -> Result<Arc<Handle>, Error> {
        self.handles.file(fh)
    }
}
