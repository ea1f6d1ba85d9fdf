//! The decoded-block cache: an LRU bounded in bytes, sharded so that
//! concurrent readers rarely contend. Decoding never happens under a lock.

use lru::LruCache;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

mod buf;
pub use buf::BlockBuf;
#[cfg(test)]
use buf::Mem;
use buf::PAGE;

/// (container id, chunk number, block number)
pub type BlockKey = (u64, u64, u32);

/// A decoded block. An owned buffer behind the `Arc` (not `Arc<[u8]>`) so
/// that a block goes into the cache without a copy and comes back out of it,
/// when evicted or consumed, as a buffer to decode the next block into.
pub type Block = Arc<BlockBuf>;

/// Spare buffers kept for reuse, at most (and at most an eighth of the budget).
const SPARES: usize = 4;
const SPARE_BYTES: usize = 16 << 20;

const SHARDS: usize = 8;

/// The last use of a demoted block: before any use, so evicted first.
const DEMOTED: u64 = 0;
/// The last use of a block whose reader is done with it: evicted first,
/// and its buffer is the next one decoded into.
const DONE: u64 = 1;
/// The first use the clock counts (after the marks above).
const FIRST_USE: u64 = 2;

struct Shard {
    /// Each block with when it was last used (`BlockCache::clock`, or
    /// [`DEMOTED`], [`DONE`]). Within a shard the LRU order is the order
    /// of these.
    lru: LruCache<BlockKey, (Block, u64)>,
    bytes: usize,
}

/// The decoded-block cache shared by all containers of an [`Env`](crate::Env):
/// an LRU bounded in bytes, sharded so that concurrent readers rarely
/// contend.
pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    /// Shared by the shards: a shard holds what its blocks were let in for.
    budget: u64,
    bytes: AtomicU64,
    /// Buffers of evicted or consumed blocks (their pages are mapped
    /// already: decoding into fresh memory costs a page fault per 4 KiB).
    spares: Mutex<Vec<BlockBuf>>,
    spare_bytes: usize,
    /// Counts uses: when each block was last used.
    clock: AtomicU64,
}

impl BlockCache {
    /// A cache holding at most `budget` bytes of decoded blocks.
    pub fn new(budget: u64) -> Self {
        BlockCache {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        lru: LruCache::unbounded(),
                        bytes: 0,
                    })
                })
                .collect(),
            budget,
            bytes: AtomicU64::new(0),
            spares: Mutex::new(Vec::new()),
            spare_bytes: SPARE_BYTES.min((budget / 8) as usize),
            clock: AtomicU64::new(FIRST_USE),
        }
    }

    fn shard_of(&self, key: &BlockKey) -> usize {
        let h = key
            .0
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(key.1.wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
            .wrapping_add(key.2 as u64);
        (h >> 32) as usize % SHARDS
    }

    fn shard(&self, key: &BlockKey) -> &Mutex<Shard> {
        &self.shards[self.shard_of(key)]
    }

    /// The block cached under `key`, if any (counted as a use).
    pub fn get(&self, key: &BlockKey) -> Option<Block> {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut s = self.shard(key).lock();
        let (b, used) = s.lru.get_mut(key)?;
        *used = now;
        Some(b.clone())
    }

    /// Is `key` cached? (Does not count as a use.)
    pub fn contains(&self, key: &BlockKey) -> bool {
        self.shard(key).lock().lru.contains(key)
    }

    /// Make `key` the first to be evicted (a reader has had its last bytes).
    pub fn demote(&self, key: &BlockKey) {
        self.mark(key, DEMOTED);
    }

    /// Make `key` the first to be evicted and its buffer the next one a
    /// block is decoded into ([`BlockCache::buffer`]): a reader that reads
    /// on is done with it.
    pub fn done(&self, key: &BlockKey) {
        self.mark(key, DONE);
    }

    fn mark(&self, key: &BlockKey, mark: u64) {
        let mut s = self.shard(key).lock();
        if let Some((_, used)) = s.lru.peek_mut(key) {
            *used = mark;
            s.lru.demote(key);
        }
    }

    /// Take one block out (a reader consumes it whole: the page cache has
    /// it now); `recycle` it once copied.
    pub fn take(&self, key: &BlockKey) -> Option<Block> {
        let v = {
            let mut s = self.shard(key).lock();
            let (v, _) = s.lru.pop(key)?;
            s.bytes -= v.footprint();
            v
        };
        self.bytes
            .fetch_sub(v.footprint() as u64, Ordering::Relaxed);
        Some(v)
    }

    /// Keep the buffer of a block nobody else holds for reuse.
    pub fn recycle(&self, b: Block) {
        if let Ok(v) = Arc::try_unwrap(b) {
            self.put_spare(v);
        }
    }

    /// Add a spare buffer (dropped if the spare list is full).
    pub fn put_spare(&self, v: BlockBuf) {
        let mut sp = self.spares.lock();
        let held: usize = sp.iter().map(|b| b.footprint()).sum();
        if sp.len() < SPARES && held + v.footprint() <= self.spare_bytes {
            sp.push(v);
        }
    }

    /// How many more spares of `len` bytes would be kept now.
    pub fn spare_room(&self, len: usize) -> usize {
        let sp = self.spares.lock();
        let held: usize = sp.iter().map(|b| b.footprint()).sum();
        let by_bytes = self.spare_bytes.saturating_sub(held) / len.next_multiple_of(PAGE).max(1);
        SPARES.saturating_sub(sp.len()).min(by_bytes)
    }

    /// Would a spare buffer of `len` bytes be kept?
    pub fn keeps_spare(&self, len: usize) -> bool {
        len.next_multiple_of(PAGE) <= self.spare_bytes
    }

    /// A buffer of `len` bytes for decoding into: a spare of about that size
    /// if there is one (its old contents are overwritten by the decoder), or
    /// the buffer of a block a reader is done with ([`BlockCache::done`])
    /// that nobody holds, or a new one. Also says how many spares of that
    /// size are left (at least one when a done block was taken: readers are
    /// done with blocks, none need preparing).
    pub fn buffer(&self, len: usize) -> (BlockBuf, usize) {
        let fits = |b: &BlockBuf| b.capacity() >= len && b.footprint() <= len.saturating_mul(2);
        let mut sp = self.spares.lock();
        let v = match sp.iter().position(fits) {
            Some(i) => {
                let mut v = sp.swap_remove(i);
                v.set_len(len);
                Some(v)
            }
            None => None,
        };
        let left = sp.iter().filter(|b| fits(b)).count();
        drop(sp);
        if let Some(v) = v {
            return (v, left);
        }
        match self.take_done(len, fits) {
            // Readers are done with blocks: no spare needs preparing.
            Some(v) => (v, left.max(1)),
            None => (BlockBuf::new(len), left),
        }
    }

    /// The buffer of a done block that `fits` and nobody holds, taken out
    /// of the cache (its pages are mapped, where a new buffer costs a page
    /// fault per 4 KiB).
    fn take_done(&self, len: usize, fits: impl Fn(&BlockBuf) -> bool) -> Option<BlockBuf> {
        for sh in &self.shards {
            let mut s = sh.lock();
            let ok = s.lru.peek_lru().is_some_and(|(_, (b, used))| {
                *used == DONE && Arc::strong_count(b) == 1 && fits(b)
            });
            if !ok {
                continue;
            }
            let (_, (b, _)) = s.lru.pop_lru()?;
            s.bytes -= b.footprint();
            drop(s);
            self.bytes
                .fetch_sub(b.footprint() as u64, Ordering::Relaxed);
            let mut v = Arc::try_unwrap(b).ok()?;
            v.set_len(len);
            return Some(v);
        }
        None
    }

    /// Insert a block, evicting the least recently used blocks until it
    /// fits the budget. A block
    /// larger than half the budget is not kept (two must fit: a delta
    /// block is decoded against block 0 of its chunk).
    pub fn insert(&self, key: BlockKey, block: Block) {
        let size = block.footprint() as u64;
        if size > self.budget / 2 {
            return;
        }
        let mut evicted = Vec::new();
        let shard = self.shard_of(&key);
        if self.reserve(size, &mut evicted) {
            let old = {
                let mut s = self.shards[shard].lock();
                s.bytes += size as usize;
                let now = self.clock.fetch_add(1, Ordering::Relaxed);
                let old = s.lru.put(key, (block, now)).map(|(b, _)| b);
                if let Some(o) = &old {
                    s.bytes -= o.footprint();
                }
                old
            };
            if let Some(o) = old {
                self.bytes
                    .fetch_sub(o.footprint() as u64, Ordering::Relaxed);
                evicted.push(o);
            }
        }
        for v in evicted {
            self.recycle(v);
        }
    }

    /// Count `size` more bytes against the budget, evicting the least
    /// recently used blocks until they fit. False if nothing is left to
    /// evict and they still do not fit (other threads' blocks are on their
    /// way in).
    fn reserve(&self, size: u64, evicted: &mut Vec<Block>) -> bool {
        loop {
            let cur = self.bytes.load(Ordering::Relaxed);
            if cur + size <= self.budget {
                if self
                    .bytes
                    .compare_exchange(cur, cur + size, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    return true;
                }
                continue;
            }
            match self.evict_oldest() {
                Some(v) => {
                    self.bytes
                        .fetch_sub(v.footprint() as u64, Ordering::Relaxed);
                    evicted.push(v);
                }
                None => return false,
            }
        }
    }

    /// Take out the least recently used block of all: the oldest of the
    /// shards' least recently used ones. (Evicting from the inserting key's
    /// shard only would make a sequential reader over a working set the size
    /// of the cache lose part of it before it is done with it.)
    fn evict_oldest(&self) -> Option<Block> {
        for _ in 0..SHARDS {
            let oldest = (0..SHARDS)
                .filter_map(|i| {
                    let s = self.shards[i].lock();
                    s.lru.peek_lru().map(|(_, (_, used))| (*used, i))
                })
                .min()?;
            let mut s = self.shards[oldest.1].lock();
            // Unless another thread took it meanwhile.
            if s.lru
                .peek_lru()
                .is_some_and(|(_, (_, used))| *used == oldest.0)
            {
                let (_, (v, _)) = s.lru.pop_lru()?;
                s.bytes -= v.footprint();
                return Some(v);
            }
        }
        None
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
                if let Some((v, _)) = s.lru.pop(&k) {
                    s.bytes -= v.footprint();
                    self.bytes
                        .fetch_sub(v.footprint() as u64, Ordering::Relaxed);
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
        self.budget
    }
}

/// Counters of the cache and the reads through it, shared by the
/// containers of an `Env`.
#[derive(Default)]
pub struct Stats {
    /// Block reads answered from the cache.
    pub cache_hits: AtomicU64,
    /// Block reads the cache could not answer.
    pub cache_misses: AtomicU64,
    /// Blocks decoded (whole or a range first).
    pub blocks_decoded: AtomicU64,
    /// Compressed bytes read from sources.
    pub source_bytes_read: AtomicU64,
    /// Block reads that bypassed the page cache (`O_DIRECT`).
    pub source_direct_reads: AtomicU64,
    /// Presented bytes decoded for reads, and for decoding ahead.
    pub bytes_served: AtomicU64,
    /// Of those, bytes of special chunks (zeros, NaN, a repeated value),
    /// served without decoding.
    pub special_bytes_served: AtomicU64,
    /// Spans decoded ahead of sequential readers.
    pub spans_decoded: AtomicU64,
    /// Presented bytes answered from spans decoded ahead.
    pub span_bytes_served: AtomicU64,
}

impl Stats {
    /// Add `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
    /// The counters and the cache's use of its budget as `name=value` lines.
    pub fn render(&self, cache: &BlockCache) -> String {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "cache_hits={}\ncache_misses={}\nblocks_decoded={}\nsource_bytes_read={}\nsource_direct_reads={}\nbytes_served={}\nspecial_bytes_served={}\nspans_decoded={}\nspan_bytes_served={}\ncache_bytes={}\ncache_budget={}\n",
            g(&self.cache_hits),
            g(&self.cache_misses),
            g(&self.blocks_decoded),
            g(&self.source_bytes_read),
            g(&self.source_direct_reads),
            g(&self.bytes_served),
            g(&self.special_bytes_served),
            g(&self.spans_decoded),
            g(&self.span_bytes_served),
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
            c.insert(k(i), Arc::new(vec![i as u8; 1000].into()));
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
            c.put_spare(vec![1u8; 4096].into());
        }
        assert_eq!(c.spares.lock().len(), SPARES);
        // Too big for the spare bytes bound.
        let c2 = BlockCache::new(1 << 20);
        c2.put_spare(vec![0u8; SPARE_BYTES + 1].into());
        assert!(c2.spares.lock().is_empty());
        // A spare much larger than asked is not handed out.
        let (v, left) = c.buffer(100);
        assert_eq!((v.len(), left), (100, 0));
        let (v, left) = c.buffer(3000);
        assert_eq!((v.len(), left), (3000, 3));
    }

    /// Eviction takes the least recently used blocks of the whole cache
    /// (whichever shards they are in), and demoted blocks first.
    #[test]
    fn eviction_is_least_recently_used_over_all_shards() {
        let c = BlockCache::new(16_000);
        let block = || Arc::new(BlockBuf::from(vec![0u8; 1000]));
        for i in 0..16 {
            c.insert((1, 0, i), block());
        }
        for i in 0..8 {
            assert!(c.get(&(1, 0, i)).is_some());
        }
        for i in 0..8 {
            c.insert((1, 1, i), block());
        }
        let kept: Vec<u32> = (0..16).filter(|&i| c.contains(&(1, 0, i))).collect();
        assert_eq!(kept, (0..8).collect::<Vec<_>>());
        c.demote(&(1, 0, 5));
        c.insert((1, 2, 0), block());
        assert!(!c.contains(&(1, 0, 5)) && c.contains(&(1, 1, 0)));
        assert_eq!(c.bytes(), 16_000);
    }

    /// With no spare at hand, a buffer is the one of a block a reader is
    /// done with and nobody holds, taken out of the cache (its pages are
    /// mapped), and no spare needs preparing; one still held stays, and a
    /// block only demoted is never taken.
    #[test]
    fn a_buffer_is_taken_from_a_done_block_nobody_holds() {
        let c = BlockCache::new(1 << 20);
        c.insert((1, 0, 0), Arc::new(BlockBuf::from(vec![7u8; 3000])));
        c.insert((1, 0, 1), Arc::new(BlockBuf::from(vec![8u8; 3000])));
        let held = c.get(&(1, 0, 0)).unwrap();
        c.done(&(1, 0, 0));
        let (v, left) = c.buffer(2000);
        assert_eq!((v[0], left), (0, 0), "a new buffer: the done block is held");
        assert!(c.contains(&(1, 0, 0)));
        drop(held);
        let (v, left) = c.buffer(2000);
        assert_eq!(
            (v.len(), v[0], left),
            (2000, 7, 1),
            "the done block's buffer"
        );
        assert!(!c.contains(&(1, 0, 0)) && c.contains(&(1, 0, 1)));
        assert_eq!(c.bytes(), 3000);
        // A block only demoted (evicted first) is not taken.
        c.demote(&(1, 0, 1));
        let (v, _) = c.buffer(2000);
        assert_eq!(v[0], 0, "a demoted block is not taken");
        assert!(c.contains(&(1, 0, 1)));
    }

    /// Large buffers are their own mappings: zeroed, page-rounded, writable
    /// after `populate`, reusable at any length up to their capacity.
    #[test]
    fn mapped_block_buffers() {
        let mut b = BlockBuf::new(300_000);
        assert!(matches!(b.mem, Mem::Map(..)));
        assert_eq!(
            (b.len(), b.footprint()),
            (300_000, 300_000usize.next_multiple_of(PAGE))
        );
        assert!(b.iter().all(|&x| x == 0));
        b.populate();
        b[299_999] = 7;
        b.set_len(b.capacity());
        assert_eq!(b[299_999], 7);
        assert_eq!(b.len(), b.footprint());
        let small = BlockBuf::new(1000);
        assert!(matches!(small.mem, Mem::Heap(..)));
        assert_eq!(small.len(), 1000);
    }

    /// The budget counts the memory a block holds, not just its length: a
    /// 512 KiB spare reused for a 300 KB block counts 512 KiB.
    #[test]
    fn budget_counts_footprint() {
        let c = BlockCache::new(64 << 20);
        c.put_spare(BlockBuf::new(512 << 10));
        let (v, _) = c.buffer(300_000);
        assert_eq!((v.len(), v.footprint()), (300_000, 512 << 10));
        c.insert((1, 0, 0), Arc::new(v));
        assert_eq!(c.bytes(), 512 << 10);
        let b = c.take(&(1, 0, 0)).unwrap();
        assert_eq!(c.bytes(), 0);
        c.recycle(b);
        assert_eq!(c.spares.lock().len(), 1);
    }

    /// The shards share one budget: a block of up to half of it is kept,
    /// evicting other shards' blocks when its own has too few, and the cache
    /// never holds more than the budget.
    #[test]
    fn shards_share_the_budget() {
        let c = BlockCache::new(1 << 20);
        let block = |n: usize| Arc::new(BlockBuf::from(vec![0u8; n]));
        for i in 0..40 {
            c.insert((1, i, 0), block(100 << 10));
            assert!(c.bytes() <= c.budget());
        }
        let held = c.bytes();
        assert!(held > (800 << 10), "{held}");
        c.insert((2, 0, 0), block((512 << 10) + 1));
        assert!(
            !c.contains(&(2, 0, 0)),
            "more than half the budget is not kept"
        );
        assert_eq!(c.bytes(), held);
        c.insert((2, 1, 0), block(500 << 10));
        assert!(c.contains(&(2, 1, 0)), "half the budget is kept");
        assert!(c.bytes() <= c.budget());
        let kept: usize = (0..40).filter(|&i| c.contains(&(1, i, 0))).count();
        assert!((4..40).contains(&kept), "{kept} small blocks left");
        assert_eq!(c.bytes(), ((kept * (100 << 10)) + (500 << 10)) as u64);
    }
}
