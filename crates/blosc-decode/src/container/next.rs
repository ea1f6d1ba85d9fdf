//! The window after a read that jumps into a slice of an array.
//!
//! `np.load(path, mmap_mode="r")[i]` copies one slice of the first axis (a
//! plane of a 3-D array) out of a mapping. Its first page fault has the
//! kernel ask for a read-around window centred on the faulting page (1 MiB
//! by default); the next window, which holds the rest of a plane larger
//! than half of that, is asked for only once the reader has copied its way
//! to it, and its blocks' stored bytes are then read from the disk one run
//! after another, the reader waiting. So when a read of [`MIN_WINDOW`]
//! bytes or more jumps (does not continue its reader's last one) and the
//! first-axis slice of the faulting byte goes on past its end, the source
//! is told, by a hint job once the read is served, that the stored blocks
//! of the next windows of the same length, up to the one the slice ends
//! in, will be needed (`Source::will_need`: a local file has the kernel
//! read them into the page cache, a remote object queues their fetch).
//! Only I/O is started: decoding that window on another CPU meanwhile made
//! the plane slower on two CPUs (the decode competes with the read's own,
//! and its blocks are then copied out of the cache). A read whose slice
//! ends inside it (a row of a 2-D array) hints nothing.

use super::table::chunk_at;
use super::{Container, View};
use crate::ahead::JobKind;
use crate::index::ChunkLoc;
use crate::io::page_size;
use std::sync::Arc;

/// The shortest read that hints the window after it: the kernel's
/// read-around of an `mmap` fault is 1 MiB (128 KiB with `-o
/// readahead=128K`); a small random `pread` is asked for in 16 KiB.
pub const MIN_WINDOW: usize = 128 << 10;

/// Chunks of the next windows hinted, at most.
const MAX_CHUNKS: usize = 8;

/// Runs of the next windows walked, at most (an array of blocks narrower
/// than its rows has thousands of short runs per window).
const WALK: usize = 4096;

/// Windows after the read hinted, at most.
const MAX_WINDOWS: u64 = 4;

impl Container {
    /// After a read of `len` bytes at `offset` that jumped (see the
    /// module): the stored blocks of the windows after it
    /// ([`Container::next_window`]), in chunks already parsed, found and
    /// hinted to their source by a hint job, off the read path.
    pub(super) fn hint_next_window(self: &Arc<Self>, offset: u64, len: usize) {
        let Some(next) = self.next_window(offset, len) else {
            return;
        };
        let me = self.clone();
        self.env.ahead.spawn(
            JobKind::Hint,
            Box::new(move || {
                let (mut want, mut runs) = (Vec::new(), 0);
                me.raw_runs(next.0, next.1, |raw, n| {
                    me.stored_span(raw, n, &mut want);
                    runs += 1;
                    want.len() < MAX_CHUNKS && runs < WALK
                });
                super::source_io::need(&me.index.sources, want);
            }),
        );
    }

    /// The window after a read of `len` bytes at `offset` (presented
    /// offset and length), if the read is large and the first-axis slice of
    /// its faulting byte goes on past its end. The kernel centres the
    /// window on the faulting page, so any byte of the page at the read's
    /// middle may be it: the last one is taken (a `.npy` header shifts the
    /// slices off page boundaries).
    fn next_window(&self, offset: u64, len: usize) -> Option<(u64, u64)> {
        let (hl, nd) = match &self.view {
            View::Npy {
                header,
                nd: Some(nd),
                ..
            } if len >= MIN_WINDOW => (header.len() as u64, nd),
            _ => return None,
        };
        let slice = nd.data_len().checked_div(*nd.shape.first()?)?;
        let end = offset.checked_add(len as u64)?;
        let page = page_size();
        let fault = (offset + len as u64 / 2) / page * page + page - 1;
        let in_data = fault.checked_sub(hl)?;
        let slice_end = hl.saturating_add((in_data / slice.max(1) + 1).saturating_mul(slice));
        if slice_end <= end || end >= self.len() {
            return None;
        }
        // The windows the kernel asks for next, each as long as this one, up
        // to the one the slice ends in.
        let windows = (slice_end - end).div_ceil(len as u64).min(MAX_WINDOWS);
        Some((end, (windows * len as u64).min(self.len() - end)))
    }

    /// Add to `want` the source span (source, offset, length) of the
    /// stored blocks under raw bytes `raw..raw + n`, one per chunk, for
    /// chunks already parsed.
    fn stored_span(&self, raw: u64, n: u64, want: &mut Vec<(u32, u64, u64)>) {
        let t = &self.index.chunks;
        let end = raw.saturating_add(n);
        let mut ci = chunk_at(t, raw);
        while ci < t.len() && t[ci].uoff < end && want.len() < MAX_CHUNKS {
            let e = &t[ci];
            let (Some(l), &ChunkLoc::Stored { src, offset, .. }) =
                (self.layouts.get(ci).and_then(|l| l.get()), &e.loc)
            else {
                return;
            };
            let a = raw.max(e.uoff) - e.uoff;
            let b = end.min(e.uoff + e.ulen) - e.uoff;
            if l.special.is_some() || l.header.blocksize == 0 || b <= a {
                return;
            }
            let (i, j) = (l.block_at(a) as usize, l.block_at(b - 1) as usize);
            let Some(blocks) = l.extents.get(i..=j) else {
                return;
            };
            let lo = blocks.iter().map(|x| u64::from(x.start)).min().unwrap_or(0);
            let hi = blocks.iter().map(|x| u64::from(x.end)).max().unwrap_or(0);
            let at = offset + lo;
            match want.last_mut() {
                // Runs of one chunk come one after another: one span.
                Some(w) if w.0 == src && w.1 <= at && at <= w.1 + w.2 => {
                    w.2 = w.2.max(at + (hi - lo) - w.1);
                }
                _ => want.push((src, at, hi.saturating_sub(lo))),
            }
            ci += 1;
        }
    }
}
