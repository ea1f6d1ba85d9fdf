//! I/O policy: how a block read uses the page cache, and when the kernel is
//! told which chunk headers come next.

use super::chunk::ChunkCtx;
use super::table::chunk_at;
use super::Container;
use crate::index::ChunkLoc;
use crate::io::{Access, Source};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Header and block starts of chunks of up to ~2,000 blocks: what a hint
/// asks the source to read of a chunk not parsed yet.
const HEAD: u64 = 8 << 10;

/// Block reads smaller than this always go through the page cache.
const MIN_DIRECT: usize = 32 << 10;
/// A block read starting within this distance of the container's previous
/// one is taken as part of a sequential scan: through the page cache, so
/// the kernel's read-ahead works for it.
const SEQ_WINDOW: u64 = 8 << 20;

impl ChunkCtx {
    /// May a block read of `len` bytes at source offset `at` bypass the
    /// page cache? Not when it continues a sequential scan (the kernel's
    /// read-ahead serves those), nor when it is small.
    pub(super) fn access(&self, at: u64, len: usize) -> Access {
        if self.env.source_io != Access::Auto {
            return self.env.source_io;
        }
        let prev = self.src_end.swap(at + len as u64, Ordering::Relaxed);
        if len < MIN_DIRECT || at.abs_diff(prev) <= SEQ_WINDOW {
            Access::Buffered
        } else {
            Access::Auto
        }
    }
}

impl Container {
    /// Once the first random read is done (`jump`: its distance from the
    /// previous one, further than `SEQ_WINDOW` or a quarter of the file),
    /// have the source read the start (header and block starts) of every
    /// stored chunk not parsed yet, in the background: the first read of
    /// each chunk after that waits for one read (its block) instead of two
    /// in a row (see docs/PERFORMANCE.md). The read that asks is not
    /// delayed: it has its bytes before any hint is given (on a remote
    /// source each hint is a GET). Sequential readers never ask for it; at
    /// most `MAX_HINTED` chunks are hinted.
    pub(super) fn hint_headers(&self, jump: u64) {
        const MAX_HINTED: usize = 1 << 16;
        // Random: far from the previous read (a sequential scan's requests
        // arrive a little out of order, and hints would only slow it; a
        // quarter of a small file is far). Once per container.
        if self.hinted.load(Ordering::Relaxed)
            || jump <= SEQ_WINDOW.min(self.len() / 4)
            || self.hinted.swap(true, Ordering::Relaxed)
        {
            return;
        }
        let want: Vec<(u32, u64, u64)> = (0..self.layouts.len())
            .filter_map(|ci| self.cold_start(ci))
            .take(MAX_HINTED)
            .collect();
        if want.len() < 2 {
            return;
        }
        let sources = self.index.sources.clone();
        // Handed off: thousands of hints take milliseconds. A hint job, not a
        // spare one: the reads it is for come soon.
        self.env.ahead.spawn(
            crate::ahead::JobKind::Hint,
            Box::new(move || {
                need(&sources, want);
            }),
        );
    }

    /// Before a read of `len` presented bytes at `offset` that crosses
    /// chunks never parsed: have the source start reading all their starts
    /// (header and block starts) at once, so that the read waits for them
    /// once, not for each chunk in turn. (A random row of a 2-D array read
    /// through `mmap` is a 1 MiB request over the end of one chunk and the
    /// start of the next.) A read within one chunk reads its start first
    /// anyway; a read that continues the one before (`jump` from its end)
    /// has the kernel read ahead in the source. At most `MAX` chunks, found
    /// in at most `WALK` runs of the request, in the index as it is, before
    /// any size it assumes is checked (`crate::sizes`): a wrong guess costs
    /// a read of bytes not used, never a wrong byte.
    pub(super) fn hint_cold_chunks(&self, offset: u64, len: usize, jump: u64) {
        const MAX: usize = 16;
        const WALK: usize = 1024;
        if jump <= len as u64 || self.parsed.load(Ordering::Relaxed) >= self.layouts.len() {
            return;
        }
        let t = &self.index.chunks;
        let Some(last_ci) = t.len().checked_sub(1) else {
            return;
        };
        let mut touched: Vec<usize> = Vec::new();
        let mut runs = 0;
        self.raw_runs(offset, len as u64, |raw, n| {
            let end = raw.saturating_add(n);
            for ci in chunk_at(t, raw)..=chunk_at(t, end.max(1) - 1).min(last_ci) {
                if !touched.contains(&ci) {
                    touched.push(ci);
                }
            }
            runs += 1;
            touched.len() < MAX && runs < WALK
        });
        let cold: Vec<(u32, u64, u64)> = touched
            .into_iter()
            .filter_map(|ci| self.cold_start(ci))
            .collect();
        if cold.len() < 2 {
            return;
        }
        for (src, offset, len) in cold {
            self.index.sources[src as usize].will_need(offset, len);
        }
    }

    /// The start (source, offset, length: header and block starts) of
    /// chunk `ci`, if it is stored and was never parsed.
    fn cold_start(&self, ci: usize) -> Option<(u32, u64, u64)> {
        match self.index.chunks.get(ci)?.loc {
            ChunkLoc::Stored {
                src,
                offset,
                cbytes,
            } if self.layouts.get(ci)?.get().is_none() => Some((src, offset, cbytes.min(HEAD))),
            _ => None,
        }
    }
}

/// Tell each source of `want` (source, offset, length) that those bytes
/// will be needed ([`Source::will_need`]): what a hint job does.
pub(super) fn need(sources: &[Arc<dyn Source>], want: Vec<(u32, u64, u64)>) {
    for (src, offset, len) in want {
        sources[src as usize].will_need(offset, len);
    }
}
