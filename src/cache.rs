//! The decoded-block cache: an LRU bounded in bytes, sharded so that
//! concurrent readers rarely contend. Decoding never happens under a lock.

use lru::LruCache;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// (container id, chunk number, block number)
pub type BlockKey = (u64, u64, u32);

/// A decoded block. A `Vec` behind the `Arc` (not `Arc<[u8]>`) so that a
/// block goes into the cache without a copy and comes back out of it, when
/// evicted or consumed, as a buffer to decode the next block into.
pub type Block = Arc<Vec<u8>>;

/// Spare buffers kept for reuse, at most.
const SPARES: usize = 4;
const SPARE_BYTES: usize = 16 << 20;

const SHARDS: usize = 8;

struct Shard {
    lru: LruCache<BlockKey, Block>,
    bytes: usize,
}

pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    shard_budget: usize,
    bytes: AtomicU64,
    /// Buffers of evicted or consumed blocks (their pages are mapped
    /// already: decoding into fresh memory costs a page fault per 4 KiB).
    spares: Mutex<Vec<Vec<u8>>>,
}

impl BlockCache {
    /// A cache holding at most `budget` bytes of decoded blocks.
    pub fn new(budget: u64) -> Self {
        let shard_budget = (budget / SHARDS as u64) as usize;
        BlockCache {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        lru: LruCache::unbounded(),
                        bytes: 0,
                    })
                })
                .collect(),
            shard_budget,
            bytes: AtomicU64::new(0),
            spares: Mutex::new(Vec::new()),
        }
    }

    fn shard(&self, key: &BlockKey) -> &Mutex<Shard> {
        let h = key
            .0
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(key.1.wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
            .wrapping_add(key.2 as u64);
        &self.shards[(h >> 32) as usize % SHARDS]
    }

    pub fn get(&self, key: &BlockKey) -> Option<Block> {
        self.shard(key).lock().lru.get(key).cloned()
    }

    /// Is `key` cached? (Does not count as a use.)
    pub fn contains(&self, key: &BlockKey) -> bool {
        self.shard(key).lock().lru.contains(key)
    }

    /// Take one block out (a reader consumes it whole: the page cache has
    /// it now); `recycle` it once copied.
    pub fn take(&self, key: &BlockKey) -> Option<Block> {
        let v = {
            let mut s = self.shard(key).lock();
            let v = s.lru.pop(key)?;
            s.bytes -= v.len();
            v
        };
        self.bytes.fetch_sub(v.len() as u64, Ordering::Relaxed);
        Some(v)
    }

    /// Keep the buffer of a block nobody else holds for reuse.
    pub fn recycle(&self, b: Block) {
        if let Ok(v) = Arc::try_unwrap(b) {
            self.put_spare(v);
        }
    }

    /// Add a spare buffer (dropped if the spare list is full).
    pub fn put_spare(&self, v: Vec<u8>) {
        let mut sp = self.spares.lock();
        let held: usize = sp.iter().map(|b| b.len()).sum();
        if sp.len() < SPARES && held + v.len() <= SPARE_BYTES {
            sp.push(v);
        }
    }

    /// A buffer of `len` bytes for decoding into: a spare of about that size
    /// if there is one (its old contents are overwritten by the decoder), or
    /// a new one. Also says how many spares of that size are left.
    pub fn buffer(&self, len: usize) -> (Vec<u8>, usize) {
        let fits = |b: &Vec<u8>| b.len() >= len && b.len() <= len.saturating_mul(2);
        let mut sp = self.spares.lock();
        let v = match sp.iter().position(fits) {
            Some(i) => {
                let mut v = sp.swap_remove(i);
                v.truncate(len);
                Some(v)
            }
            None => None,
        };
        let left = sp.iter().filter(|b| fits(b)).count();
        drop(sp);
        (v.unwrap_or_else(|| vec![0u8; len]), left)
    }

    /// Insert a block; blocks larger than a shard's budget are not kept.
    pub fn insert(&self, key: BlockKey, block: Block) {
        let size = block.len();
        if size > self.shard_budget {
            return;
        }
        let mut freed = 0usize;
        let mut evicted = Vec::new();
        {
            let mut s = self.shard(&key).lock();
            if let Some(old) = s.lru.put(key, block) {
                freed += old.len();
                evicted.push(old);
            }
            s.bytes = s.bytes + size - freed;
            while s.bytes > self.shard_budget {
                match s.lru.pop_lru() {
                    Some((_, v)) => {
                        s.bytes -= v.len();
                        freed += v.len();
                        evicted.push(v);
                    }
                    None => break,
                }
            }
        }
        self.bytes.fetch_add(size as u64, Ordering::Relaxed);
        self.bytes.fetch_sub(freed as u64, Ordering::Relaxed);
        for v in evicted {
            self.recycle(v);
        }
    }

    /// Drop every block of one container (when its source changed).
    pub fn forget_container(&self, id: u64) {
        for sh in &self.shards {
            let mut s = sh.lock();
            let keys: Vec<BlockKey> = s
                .lru
                .iter()
                .filter(|(k, _)| k.0 == id)
                .map(|(k, _)| *k)
                .collect();
            for k in keys {
                if let Some(v) = s.lru.pop(&k) {
                    s.bytes -= v.len();
                    self.bytes.fetch_sub(v.len() as u64, Ordering::Relaxed);
                }
            }
        }
    }

    /// Bytes currently held.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The byte budget.
    pub fn budget(&self) -> u64 {
        (self.shard_budget * SHARDS) as u64
    }
}

/// Counters a user can read from the mount root (`user.bloscfs.stats`).
#[derive(Default)]
pub struct Stats {
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    pub blocks_decoded: AtomicU64,
    pub source_bytes_read: AtomicU64,
    /// Block reads that bypassed the page cache (`O_DIRECT`).
    pub source_direct_reads: AtomicU64,
    pub bytes_served: AtomicU64,
    pub special_bytes_served: AtomicU64,
}

impl Stats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
    pub fn render(&self, cache: &BlockCache) -> String {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "cache_hits={}\ncache_misses={}\nblocks_decoded={}\nsource_bytes_read={}\nsource_direct_reads={}\nbytes_served={}\nspecial_bytes_served={}\ncache_bytes={}\ncache_budget={}\n",
            g(&self.cache_hits),
            g(&self.cache_misses),
            g(&self.blocks_decoded),
            g(&self.source_bytes_read),
            g(&self.source_direct_reads),
            g(&self.bytes_served),
            g(&self.special_bytes_served),
            cache.bytes(),
            cache.budget()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicted_and_removed_blocks_become_spares_only_when_unshared() {
        let c = BlockCache::new(8 * 1024); // shards of 1 KiB
        let k = |i| (1u64, 0u64, i);
        // Same shard for every key is not guaranteed: insert until evictions.
        for i in 0..64 {
            c.insert(k(i), Arc::new(vec![i as u8; 1000]));
        }
        assert!(c.bytes() <= c.budget());
        let (v, _) = c.buffer(1000);
        assert_eq!(
            v.len(),
            1000,
            "a spare (or a new buffer) of the length asked"
        );
        // A block still held by a reader is not recycled.
        let held = c.get(&k(63)).expect("last insert is cached");
        if let Some(b) = c.take(&k(63)) {
            c.recycle(b);
        }
        assert_eq!(held.len(), 1000);
        let before = c.spares.lock().len();
        c.recycle(held.clone());
        assert_eq!(c.spares.lock().len(), before, "shared block recycled");
        drop(held);
    }

    #[test]
    fn spares_are_bounded_and_sized() {
        let c = BlockCache::new(1 << 20);
        for _ in 0..10 {
            c.put_spare(vec![1u8; 4096]);
        }
        assert_eq!(c.spares.lock().len(), SPARES);
        // Too big for the spare bytes bound.
        let c2 = BlockCache::new(1 << 20);
        c2.put_spare(vec![0u8; SPARE_BYTES + 1]);
        assert!(c2.spares.lock().is_empty());
        // A spare much larger than asked is not handed out.
        let (v, left) = c.buffer(100);
        assert_eq!((v.len(), left), (100, 0));
        let (v, left) = c.buffer(3000);
        assert_eq!((v.len(), left), (3000, 3));
    }
}
