//! The open-container cache: containers recently opened (bounded), those
//! still held by open handles, and sources that failed to open.

use super::*;

/// Open containers per inode, each with the stamp it was opened at.
pub(super) struct OpenContainers {
    /// Recently opened containers (bounded), with the stamp they were opened at.
    recent: Mutex<Recent>,
    /// Containers still held by open handles (shared by new opens).
    live: Mutex<HashMap<u64, (Stamp, Weak<Container>)>>,
    /// Sources that look like containers but failed to open: listed as
    /// their probe says, and their opens fail with `EIO` at once, while
    /// their stamp is unchanged.
    broken: Mutex<HashMap<u64, Stamp>>,
}

impl OpenContainers {
    pub(super) fn new() -> OpenContainers {
        OpenContainers {
            recent: Mutex::new(Recent::new()),
            live: Mutex::new(HashMap::new()),
            broken: Mutex::new(HashMap::new()),
        }
    }

    /// Did the source of `ino` fail to open at `stamp`?
    pub(super) fn is_broken(&self, ino: u64, stamp: Stamp) -> bool {
        self.broken.lock().get(&ino) == Some(&stamp)
    }

    pub(super) fn set_broken(&self, ino: u64, stamp: Stamp) {
        insert_capped(&mut self.broken.lock(), ino, stamp);
    }

    /// The container of `ino` opened at `stamp`, kept or held by a handle
    /// (one kept for another stamp is dropped: changed underneath).
    pub(super) fn get(&self, ino: u64, stamp: Stamp) -> Option<Arc<Container>> {
        {
            let mut cache = self.recent.lock();
            match cache.get(&ino) {
                Some((s, c)) if *s == stamp => return Some(c.clone()),
                Some(_) => cache.pop(&ino),
                None => {}
            }
        }
        let live = self
            .live
            .lock()
            .get(&ino)
            .filter(|(s, _)| *s == stamp)
            .and_then(|(_, w)| w.upgrade())?;
        self.recent.lock().put(ino, stamp, live.clone());
        Some(live)
    }

    /// Keep `c`, just opened for `ino` at `stamp`.
    pub(super) fn keep(&self, ino: u64, stamp: Stamp, c: &Arc<Container>) {
        self.recent.lock().put(ino, stamp, c.clone());
        let mut live = self.live.lock();
        if live.len() >= 4 * CONTAINER_CACHE {
            live.retain(|_, (_, w)| w.strong_count() > 0);
        }
        live.insert(ino, (stamp, Arc::downgrade(c)));
    }

    /// Drop `c` from the containers kept for `ino` (not another one
    /// opened since).
    pub(super) fn forget(&self, ino: u64, c: &Arc<Container>) {
        let mut cache = self.recent.lock();
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

    /// Drop the kept containers no open handle holds for which `drop`
    /// says so (their descriptors close); how many went.
    pub(super) fn drop_idle(&self, drop: impl Fn(&Container) -> bool) -> usize {
        self.recent.lock().drop_idle(drop)
    }
}

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
    fn new() -> Recent {
        let cap = (crate::local::fd_limit() / 8).clamp(4, CONTAINER_CACHE);
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
        Arc::new(Container::new(Path::new("z"), index, Env::new(1 << 20)).unwrap())
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
