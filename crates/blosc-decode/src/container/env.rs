//! [`Env`]: what containers share, and its defaults.

use crate::ahead::policy::DecodeAhead;
use crate::ahead::Ahead;
use crate::cache::{BlockCache, Stats};
use crate::io::Access;
use std::sync::Arc;

/// What containers share: the block cache, the decode-ahead pool, the
/// counters, and options.
#[derive(Clone)]
pub struct Env {
    /// The decoded-block cache.
    pub cache: Arc<BlockCache>,
    /// Counters of what reads did.
    pub stats: Arc<Stats>,
    /// The decode-ahead pool for sequential readers (none unless asked for:
    /// [`Env::per_cpu`], [`Env::with_workers`]).
    pub ahead: Arc<Ahead>,
    /// Verify stored chunk checksums (Bloscpack) on first read of each chunk.
    pub verify_checksums: bool,
    /// How far past a sequential reader's last request to decode ahead:
    /// sized to the machine and the readers (`Auto`), or fixed.
    pub decode_ahead: DecodeAhead,
    /// Bytes of one span decoded ahead (`ahead::policy::SPAN`).
    pub span: u64,
    /// Whether block reads may bypass the page cache.
    pub source_io: Access,
}

impl Env {
    /// A cache of `cache_bytes` and no pool: no thread is ever started,
    /// every block is decoded by the read that needs it, none ahead.
    pub fn new(cache_bytes: u64) -> Self {
        Env::with_workers(cache_bytes, 0)
    }

    /// A cache of `cache_bytes` and a pool of one thread per CPU, each
    /// started on first use, for decoding ahead of sequential readers.
    pub fn per_cpu(cache_bytes: u64) -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        Env::with_workers(cache_bytes, cpus)
    }

    /// `workers` pool threads (0: no pool: no decoding ahead, and spare
    /// block buffers are not prepared in the background). The automatic
    /// decode-ahead takes them for the CPUs it may use.
    pub fn with_workers(cache_bytes: u64, workers: usize) -> Self {
        Env {
            cache: Arc::new(BlockCache::new(cache_bytes)),
            stats: Arc::new(Stats::default()),
            ahead: Arc::new(Ahead::new(workers)),
            verify_checksums: true,
            decode_ahead: DEFAULT_DECODE_AHEAD,
            span: crate::ahead::policy::SPAN,
            source_io: Access::Auto,
        }
    }
}

/// Default decode-ahead for sequential readers: automatic, on the cores
/// the readers leave idle (none on 3 CPUs or fewer: see `ahead::policy`).
pub const DEFAULT_DECODE_AHEAD: DecodeAhead = DecodeAhead::Auto;

/// Default bound of the decoded-block cache (bytes): [`Env::default`]'s.
pub const DEFAULT_CACHE_SIZE: u64 = 256 << 20;

impl Default for Env {
    /// [`Env::new`] with a cache of [`DEFAULT_CACHE_SIZE`]: no thread.
    fn default() -> Self {
        Env::new(DEFAULT_CACHE_SIZE)
    }
}
