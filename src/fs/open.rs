//! Opening: kept containers (`Recent`), open and release of handles.

use super::*;

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
pub(super) struct Recent {
    lru: lru::LruCache<u64, (Stamp, Arc<Container>)>,
    bytes: usize,
}

impl Recent {
    pub(super) fn new() -> Recent {
        let cap = (io::fd_limit() / 8).clamp(4, CONTAINER_CACHE);
        Recent {
            lru: lru::LruCache::new(std::num::NonZeroUsize::new(cap).expect("nonzero")),
            bytes: 0,
        }
    }
    /// Drop the kept containers no open handle holds for which `drop`
    /// says so (their descriptors close); how many went.
    pub(super) fn drop_idle(&mut self, drop: impl Fn(&Container) -> bool) -> usize {
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

impl Fs {
    /// Close the descriptors of kept containers no handle holds whose
    /// source file was deleted (its disk space is freed only then); how
    /// many went. The mount calls this every few seconds.
    pub fn release_deleted(&self) -> usize {
        self.containers.lock().drop_idle(|c| c.source_gone())
    }

    /// The container behind `ino`, opened (or reused while its source is
    /// unchanged). `Ok(None)`: the source looks like a container but cannot
    /// be opened as one (one warning); it is not tried again until it
    /// changes.
    pub(super) fn container(
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
                Err(e) if e.kind == blosc_decode::ErrorKind::Io && exhausted(e.errno()) => {
                    Err(e.errno())
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
    fn open_checked(&self, path: &Path, md: &Metadata) -> blosc_decode::Result<Option<Container>> {
        let swapped = || {
            blosc_decode::Error::new(
                blosc_decode::ErrorKind::Changed,
                "replaced since it was looked up: not opened",
            )
            .in_file(path)
        };
        if md.is_dir() {
            if !blosc_decode::open::frame::is_sframe_dir(path) {
                return Ok(None);
            }
            let dir = SourceDir::open(path, false)
                .map_err(|e| blosc_decode::Error::from(e).in_file(path))?;
            if !dir.is(md) {
                return Err(swapped());
            }
            return detect::open_sframe_dir(Arc::new(dir), &self.env).map(Some);
        }
        let (file, fmd) =
            io::open_regular(path).map_err(|e| blosc_decode::Error::from(e).in_file(path))?;
        if !same_file(&fmd, md) {
            return Err(swapped());
        }
        let src = Arc::new(io::FileSource::opened(file, &fmd, path));
        detect::open_source(src, path, &self.env)
    }

    /// Drop `c` from the open containers kept for `ino` (not another one
    /// opened since), so the next open of `ino` opens it again.
    pub(super) fn forget_container(&self, ino: u64, c: &Arc<Container>) {
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
    pub(super) fn warn_once(&self, key: &str, msg: &str) {
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
                Handle::Plain(PlainHandle {
                    file,
                    path: path.clone(),
                    stamp: Stamp::of(&fmd),
                })
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
                Handle::Container(ContainerHandle {
                    container: c,
                    stamp_path: sp,
                    stamp: Self::stamp_of(&path, &md),
                    ino,
                })
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
    pub(super) fn raw_view_holds(&self, path: &Path, md: &Metadata, stamp: Stamp) -> bool {
        Stamp::of(md) == stamp || matches!(self.probe(path, md), Ok(None))
    }

    /// Log once that `path` changed under an open handle (`why`, if any),
    /// and the errno its reads fail with until it is reopened.
    pub(super) fn changed_while_open(&self, path: &Path, why: &str) -> i32 {
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

    pub(super) fn handle(&self, fh: u64) -> Result<Arc<Handle>, i32> {
        self.handles
            .read()
            .get(&fh)
            .map(|(h, _)| h.clone())
            .ok_or(libc::EBADF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container of `n` zero chunks of 1 KiB (an index and nothing else).
    fn zeros_container(n: usize) -> Arc<Container> {
        use blosc_decode::index::{ChunkEntry, ChunkLoc, Index, Info};
        let chunks = (0..n as u64)
            .map(|i| ChunkEntry {
                chunk: i,
                uoff: i * 1024,
                ulen: 1024,
                loc: ChunkLoc::Special {
                    kind: blosc_decode::format::chunk::Special::Zeros,
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
