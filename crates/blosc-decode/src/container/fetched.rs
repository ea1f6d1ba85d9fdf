//! Caches that hold only some of their chunks (python-blosc2's `Proxy` and
//! `RemoteArray` caches, [`crate::format::proxy`]): a read of a chunk or
//! block never fetched fails (`ErrorKind::Missing`) instead of showing the
//! zeros the cache keeps in its place; fetched ones read as they are.

use super::Container;
use crate::error::{Error, ErrorKind, Result};
use crate::format::chunk::ChunkLayout;
use crate::format::proxy::Fetched;
use crate::index::ChunkLoc;

/// What a cache holds, and what kind of cache it is (for messages).
#[derive(Debug)]
pub struct Cache {
    /// `"proxy cache"` or `"RemoteArray cache"`.
    pub kind: &'static str,
    /// Which chunks or blocks it holds.
    pub fetched: Fetched,
}

/// How many chunks of a cache are fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    /// Chunks held whole.
    pub whole: u64,
    /// Chunks of which some blocks are held, not all.
    pub partly: u64,
    /// Chunks in all.
    pub nchunks: u64,
}

impl Container {
    /// Mark the container as a cache holding what `cache` says.
    pub fn set_cache(&mut self, cache: Cache) {
        self.cache = Some(cache);
    }

    /// What the container holds of its source, if it is a cache.
    pub fn cache(&self) -> Option<&Cache> {
        self.cache.as_ref()
    }

    /// Chunks fetched whole and in part, if the container is a cache.
    pub fn fetched_count(&self) -> Option<Count> {
        let cache = self.cache.as_ref()?;
        let nchunks = self.info().nchunks;
        let mut count = Count {
            whole: 0,
            partly: 0,
            nchunks,
        };
        for n in 0..nchunks {
            if self.chunk_fetched(n) {
                count.whole += 1;
            } else if (0..cache.fetched.bpc()).any(|b| cache.fetched.block(n, b) == Some(true)) {
                count.partly += 1;
            }
        }
        Some(count)
    }

    /// Is chunk `n` (by the container's numbering) held whole?
    fn chunk_fetched(&self, n: u64) -> bool {
        let Some(cache) = &self.cache else {
            return true;
        };
        cache
            .fetched
            .chunk(n)
            .unwrap_or_else(|| !self.special_chunk(n))
    }

    /// Is chunk `n` a special one (by the table, or its header)?
    fn special_chunk(&self, n: u64) -> bool {
        let chunks = self.chunks();
        let ci = chunks.partition_point(|e| e.chunk <= n).saturating_sub(1);
        match chunks.get(ci) {
            // (A stored entry is one chunk; one whose header does not read
            // is not taken for data.)
            Some(e) if e.chunk == n && matches!(e.loc, ChunkLoc::Stored { .. }) => {
                self.layout(ci).map_or(true, |l| l.special.is_some())
            }
            _ => true,
        }
    }

    /// Is every chunk of table entry `ci` held whole?
    pub(super) fn entry_fetched(&self, ci: usize) -> bool {
        if self.cache.is_none() {
            return true;
        }
        let chunks = self.chunks();
        let first = chunks[ci].chunk;
        let next = chunks.get(ci + 1).map_or(self.info().nchunks, |e| e.chunk);
        (first..next.max(first + 1)).all(|n| self.chunk_fetched(n))
    }

    /// Fail unless bytes `a..a+len` (`len` > 0) of table entry `ci` were
    /// fetched: for a stored chunk of a block bitmap (its `layout`), the
    /// blocks they touch; otherwise every chunk they touch, whole.
    pub(super) fn check_fetched(
        &self,
        ci: usize,
        a: u64,
        len: u64,
        layout: Option<&ChunkLayout>,
    ) -> Result<()> {
        let Some(cache) = self.cache.as_ref().filter(|_| len > 0) else {
            return Ok(());
        };
        let e = &self.chunks()[ci];
        let blocks = layout.filter(|l| l.special.is_none() && cache.fetched.bpc() > 1);
        if let Some(l) = blocks {
            return self.check_blocks(cache, e.chunk, l, a, len);
        }
        let cs = self.info().chunksize;
        let (first, last) = match cs {
            0 => (0, 0),
            cs => (a / cs, (a + len - 1) / cs),
        };
        for k in first..=last {
            let n = e.chunk + k;
            let held = match cache.fetched.chunk(n) {
                Some(b) => b,
                None => layout.is_some_and(|l| l.special.is_none()),
            };
            if !held {
                return Err(missing(cache, n, None));
            }
        }
        Ok(())
    }

    /// [`Container::check_fetched`] for the blocks of stored chunk `n`.
    fn check_blocks(&self, cache: &Cache, n: u64, l: &ChunkLayout, a: u64, len: u64) -> Result<()> {
        let bpc = cache.fetched.bpc();
        if l.nblocks() as u64 != bpc {
            return Err(Error::corrupt(format!(
                "the {} counts {bpc} blocks a chunk, but the chunk holds {}",
                cache.kind,
                l.nblocks()
            ))
            .in_chunk(n));
        }
        for b in l.block_at(a)..=l.block_at(a + len - 1) {
            if cache.fetched.block(n, b as u64) != Some(true) {
                return Err(missing(cache, n, Some(b as u64)));
            }
        }
        Ok(())
    }
}

/// The error of a read of chunk `n` (block `b`) that the cache never fetched.
fn missing(cache: &Cache, n: u64, b: Option<u64>) -> Error {
    let what = if b.is_some() { "block" } else { "chunk" };
    let e = Error::new(
        ErrorKind::Missing,
        format!(
            "{what} not fetched: this {} holds only what was read through it from its source",
            cache.kind
        ),
    )
    .in_chunk(n);
    match b {
        Some(b) => e.in_block(b),
        None => e,
    }
}
