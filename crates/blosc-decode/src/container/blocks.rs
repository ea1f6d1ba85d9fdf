//! Blocks between the cache and the runner: a block is taken from whichever
//! has it, decoded once however many readers want it, and queued on the
//! runner to be decoded in parallel with a read's other blocks.

use super::chunk::ChunkCtx;
use crate::ahead::{Claim, JobKind};
use crate::cache::{Block, BlockBuf, Stats};
use crate::error::Result;
use std::sync::Arc;

impl ChunkCtx {
    /// Neither cached nor queued.
    pub(super) fn missing(&self, i: u32) -> bool {
        let k = self.key(i);
        !self.env.cache.contains(&k) && self.env.ahead.lookup(&k).is_none()
    }

    /// Hand block `i` to the runner unless it is cached or queued already.
    /// False when the runner refuses (off or full).
    pub(super) fn queue(&self, i: u32) -> bool {
        if !self.missing(i) {
            return true;
        }
        let key = self.key(i);
        let me = self.clone();
        // Not `cached_block`: the job must not wait for its own slot. Errors
        // are dropped: the reader decodes again and reports them.
        self.env.ahead.submit(
            key,
            Box::new(move || match me.env.cache.get(&key) {
                Some(b) => Some(b),
                None => me.decode_new(i).ok(),
            }),
        )
    }

    /// Fill `dst` (all of block `i`) from the cache or the runner, if either
    /// has it or the runner has not started it (then it is decoded here).
    /// A block consumed whole leaves the cache: the page cache has it now.
    pub(super) fn take_ready(&self, i: u32, dst: &mut [u8], block0: Option<&[u8]>) -> Result<bool> {
        let key = self.key(i);
        let consume = |b: Block, dst: &mut [u8]| {
            dst.copy_from_slice(&b);
            self.env.cache.recycle(b);
            Stats::add(&self.env.stats.cache_hits, 1);
            Ok(true)
        };
        // The runner's table first, then the cache: a job puts its block in the cache
        // before it leaves the table, so no finished block is missed.
        if let Some(slot) = self.env.ahead.lookup(&key) {
            match self.env.ahead.claim(&slot) {
                Claim::Mine => {
                    let r = self.decode_run(i, i, block0, dst);
                    self.env.ahead.finish(key, &slot, None);
                    return r.map(|()| true);
                }
                Claim::Done(Some(b)) => {
                    drop(self.env.cache.take(&key));
                    return consume(b, dst);
                }
                Claim::Done(None) => {}
            }
        }
        match self.env.cache.take(&key) {
            Some(b) => consume(b, dst),
            None => Ok(false),
        }
    }

    /// Block `i`, from the cache, from the runner, or decoded into the cache.
    /// While it is decoded here, other readers of it wait for it (see
    /// `Ahead::load_once`) rather than decode it a second time.
    pub(super) fn cached_block(&self, i: u32) -> Result<Block> {
        let key = self.key(i);
        let hit = || Stats::add(&self.env.stats.cache_hits, 1);
        self.env.ahead.load_once(
            key,
            || self.env.cache.get(&key).inspect(|_| hit()),
            || {
                Stats::add(&self.env.stats.cache_misses, 1);
                self.decode_new(i)
            },
            |r| r.as_ref().ok().cloned(),
            |b| {
                hit();
                b
            },
        )
    }

    /// Decode block `i` into a new buffer and the cache.
    fn decode_new(&self, i: u32) -> Result<Block> {
        let block0 = if i > 0 && self.delta() {
            Some(self.cached_block(0)?)
        } else {
            None
        };
        let mut out = self.buffer(self.layout.block_len(i) as usize);
        if let Err(e) = self.decode_run(i, i, block0.as_ref().map(|b| &b[..]), &mut out) {
            self.env.cache.put_spare(out);
            return Err(e);
        }
        let out = Arc::new(out);
        self.env.cache.insert(self.key(i), out.clone());
        Ok(out)
    }

    /// A buffer to decode a block into: a spare one (its pages are mapped)
    /// when there is one. When spares run low the runner maps a new one off
    /// the read path, so a cold read rarely pays a page fault per 4 KiB.
    pub(super) fn buffer(&self, len: usize) -> BlockBuf {
        let (v, left) = self.env.cache.buffer(len);
        // A spare too big to be kept is not prepared (a block of a lying
        // size must not map its pages in advance).
        if left == 0 && self.env.cache.keeps_spare(len) {
            let cache = self.env.cache.clone();
            self.env.ahead.spawn(
                JobKind::Spare,
                Box::new(move || {
                    let mut v = BlockBuf::new(len);
                    v.populate();
                    cache.put_spare(v);
                }),
            );
        }
        v
    }
}
