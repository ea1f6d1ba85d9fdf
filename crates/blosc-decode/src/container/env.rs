//! [`Env`]: what containers share, and its defaults.

use crate::ahead::policy::DecodeAhead;
use crate::ahead::{Ahead, JobKind, Runner};
use crate::cache::{BlockBuf, BlockCache, Stats};
use crate::io::Access;
use std::sync::Arc;

/// What containers share: the block cache, the decode-ahead state (and the
/// [`Runner`] it hands jobs to, if any), the counters, and options.
#[derive(Clone)]
pub struct Env {
    /// The decoded-block cache.
    pub cache: Arc<BlockCache>,
    /// Counters of what reads did.
    pub stats: Arc<Stats>,
    /// Decoding ahead of sequential readers and in parallel: the runner
    /// (none unless given: [`Env::with_runner`]) and the blocks queued on it.
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
    /// A cache of `cache_bytes` and no runner: no thread is ever started,
    /// every block is decoded by the read that needs it, none ahead.
    pub fn new(cache_bytes: u64) -> Self {
        Env::with_ahead(cache_bytes, Ahead::new(None))
    }

    /// A cache of `cache_bytes`, with `runner` decoding ahead of sequential
    /// readers (as many spans at once as its [`Runner::workers`]), the
    /// blocks of a scattered read in parallel, and spare block buffers off
    /// the read path.
    pub fn with_runner(cache_bytes: u64, runner: Arc<dyn Runner>) -> Self {
        Env::with_ahead(cache_bytes, Ahead::new(Some(runner)))
    }

    /// Have the runner map spare buffers of `len` bytes, as many as the
    /// cache keeps, off the read path: the first blocks a read hands to the
    /// runner are then decoded into mapped pages, not page-faulted in.
    pub fn prepare_spares(&self, len: usize) {
        let cache = self.cache.clone();
        if cache.spare_room(len) == 0 {
            return;
        }
        self.ahead.spawn(
            JobKind::Spare,
            Box::new(move || {
                for _ in 0..cache.spare_room(len) {
                    let mut v = BlockBuf::new(len);
                    v.populate();
                    cache.put_spare(v);
                }
            }),
        );
    }

    fn with_ahead(cache_bytes: u64, ahead: Ahead) -> Self {
        Env {
            cache: Arc::new(BlockCache::new(cache_bytes)),
            stats: Arc::new(Stats::default()),
            ahead: Arc::new(ahead),
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
