//! `.npy` reads of b2nd arrays, gathered block by block.
//!
//! A C-order range of an array maps to runs of the raw content (chunk by
//! chunk, block by block). When blocks are narrower than the array's rows, a
//! 128 KiB request is thousands of short runs over up to a hundred blocks,
//! each block met once per row; served one run at a time, each meeting would
//! find its block not yet cached (or evicted) and decode it again. Here the
//! short runs of a request (those inside one block) are sorted by raw offset
//! and served block by block: each block they touch is looked up once,
//! decoded whole into the cache when missing (other blocks of the request
//! meanwhile on the runner, when there is one), and its runs copied out. Runs
//! of a whole block or more (row-wise blocks, 1-D arrays) go through
//! `read_raw_at`, which decodes whole blocks straight into the reply.

use super::chunk::ChunkCtx;
use super::table::chunk_at;
use super::Container;
use crate::cache::Stats;
use crate::deferred::Deferred;
use crate::error::Result;
use crate::index::ChunkLoc;
use crate::npy::NdLayout;
use std::cell::RefCell;

/// A run of a request: `len` bytes of raw content at `raw` go to `out[pos..]`.
#[derive(Clone, Copy, Debug)]
struct Piece {
    raw: u64,
    pos: usize,
    len: usize,
}

/// Short runs sorted and served together, at most: a request of more is
/// served in batches (bounds the list at 384 KiB).
const BATCH: usize = 1 << 14;

thread_local! {
    /// The short runs of the request being served (kept for the next one).
    static SHORT: RefCell<Vec<Piece>> = const { RefCell::new(Vec::new()) };
}

/// The runs of one request as `for_each_run` walks them.
struct Gather<'a> {
    c: &'a Container,
    out: &'a mut [u8],
    /// `out` holds bytes `skip..end` of the element-aligned window.
    skip: u64,
    end: u64,
    block_bytes: u64,
    short: &'a mut Vec<Piece>,
    later: &'a mut Deferred,
}

impl Gather<'_> {
    /// Bytes `w..w+bytes` of the window are raw bytes from `raw`: whole
    /// blocks are read at once, parts of blocks gathered. (A run may end in
    /// one block and go on in the next: the last row of a chunk and the
    /// first of the next one.)
    fn run(&mut self, raw: u64, w: u64, bytes: u64) -> Result<()> {
        let (lo, hi) = (w.max(self.skip), (w + bytes).min(self.end));
        let (mut raw, mut pos) = (raw + lo.saturating_sub(w), lo.saturating_sub(self.skip));
        let mut left = hi.saturating_sub(lo);
        let bb = self.block_bytes;
        while left > 0 {
            let into = raw % bb;
            let n = if into == 0 && left >= bb {
                left / bb * bb
            } else {
                left.min(bb - into)
            };
            let p = Piece {
                raw,
                pos: pos as usize,
                len: n as usize,
            };
            if n >= bb {
                let out = &mut self.out[p.pos..p.pos + p.len];
                self.c.read_exact_raw(p.raw, out, self.later)?;
            } else {
                self.short.push(p);
                if self.short.len() >= BATCH {
                    self.c.serve(self.short, self.out, self.later)?;
                    self.short.clear();
                }
            }
            (raw, pos, left) = (raw + n, pos + n, left - n);
        }
        Ok(())
    }
}

impl Container {
    /// Fill `out` with the array's C-order bytes from `data_off` (an offset
    /// past the `.npy` header).
    pub(super) fn read_array(
        &self,
        nd: &NdLayout,
        data_off: u64,
        out: &mut [u8],
        later: &mut Deferred,
    ) -> Result<()> {
        let is = nd.itemsize;
        let e0 = data_off / is;
        let e1 = (data_off + out.len() as u64).div_ceil(is);
        let skip = data_off - e0 * is;
        SHORT.with(|s| {
            let mut short = s.borrow_mut();
            short.clear();
            let mut g = Gather {
                c: self,
                end: skip + out.len() as u64,
                out,
                skip,
                block_bytes: nd.block_bytes(),
                short: &mut short,
                later,
            };
            // Runs adjacent in the raw content are merged first.
            let mut w = 0u64;
            let mut merged: Option<(u64, u64, u64)> = None; // raw, window, bytes
            nd.for_each_run(e0, e1 - e0, |raw, k| {
                let bytes = k * is;
                match merged {
                    Some((r, mw, n)) if r + n == raw => merged = Some((r, mw, n + bytes)),
                    Some((r, mw, n)) => {
                        g.run(r, mw, n)?;
                        merged = Some((raw, w, bytes));
                    }
                    None => merged = Some((raw, w, bytes)),
                }
                w += bytes;
                Ok(())
            })?;
            if let Some((r, mw, n)) = merged {
                g.run(r, mw, n)?;
            }
            let r = self.serve(g.short, g.out, g.later);
            short.clear();
            short.shrink_to(BATCH);
            r
        })
    }

    /// `read_raw_at` for bytes the content must have.
    fn read_exact_raw(&self, raw: u64, out: &mut [u8], later: &mut Deferred) -> Result<()> {
        let got = self.read_raw_at(raw, out, later)?;
        crate::ensure!(got == out.len(), truncated, "array chunk data is short");
        Ok(())
    }

    /// Serve short runs: sorted, grouped by block, each block looked up or
    /// decoded once. Blocks another reader is decoding are served last.
    fn serve(&self, short: &mut [Piece], out: &mut [u8], later: &mut Deferred) -> Result<()> {
        // Stable: it merges the ascending runs the rows come in (one per row).
        short.sort_by_key(|p| p.raw);
        let mut groups = Vec::new();
        let mut g = 0;
        while g < short.len() {
            g = self.group(short, g, out, &mut groups, later)?;
        }
        self.queue_groups(&groups);
        let mut busy = Vec::new();
        for grp in &groups {
            if grp.ctx.running(grp.i) {
                busy.push(grp);
            } else {
                self.serve_group(grp, short, out)?;
            }
        }
        for grp in busy {
            self.serve_group(grp, short, out)?;
        }
        // (Runs read at once counted themselves.)
        let n: usize = groups
            .iter()
            .flat_map(|g| &short[g.runs.clone()])
            .map(|p| p.len)
            .sum();
        Stats::add(&self.env.stats.bytes_served, n as u64);
        Ok(())
    }

    /// The runs from `short[g]` on that lie in its block, as a group in
    /// `groups`; runs of special chunks (and any run across a block edge,
    /// which a chunk whose block size differs from the array's would have)
    /// are read at once. Returns where the next group starts.
    fn group(
        &self,
        short: &[Piece],
        g: usize,
        out: &mut [u8],
        groups: &mut Vec<Group>,
        later: &mut Deferred,
    ) -> Result<usize> {
        let p = short[g];
        let chunks = self.table_to(p.raw, p.raw + p.len as u64)?;
        let ci = chunk_at(chunks, p.raw);
        let entry = &chunks[ci];
        let ctx = match entry.loc {
            ChunkLoc::Stored { src, offset, .. } => {
                let layout = self
                    .layout(ci)
                    .map_err(|e| e.in_chunk(entry.chunk).in_file(&self.path))?;
                layout
                    .special
                    .is_none()
                    .then(|| self.ctx(ci, layout, src, offset))
            }
            ChunkLoc::Special { .. } => None,
        };
        let Some(ctx) = ctx.filter(|c| c.layout.header.blocksize > 0) else {
            self.read_exact_raw(p.raw, &mut out[p.pos..p.pos + p.len], later)?;
            return Ok(g + 1);
        };
        let l = &ctx.layout;
        let i = l.block_at(p.raw - entry.uoff);
        self.check_fetched(ci, p.raw - entry.uoff, p.len as u64, Some(l))
            .map_err(|e| e.in_chunk(entry.chunk).in_file(&self.path))?;
        let start = entry.uoff + l.block_start(i);
        let end = start + l.block_len(i) as u64;
        let n = short[g..].partition_point(|q| q.raw + q.len as u64 <= end);
        if n == 0 {
            self.read_exact_raw(p.raw, &mut out[p.pos..p.pos + p.len], later)?;
            return Ok(g + 1);
        }
        groups.push(Group {
            ctx,
            chunk: entry.chunk,
            i,
            start,
            end,
            runs: g..g + n,
        });
        Ok(g + n)
    }

    /// Hand the missing blocks of the groups after the first to the runner,
    /// so that they are decoded in parallel with the first; at most as many
    /// as half the cache holds (a block decoded ahead and evicted before it
    /// is copied out would be decoded twice).
    fn queue_groups(&self, groups: &[Group]) {
        let Some(first) = groups.first() else { return };
        if !self.env.ahead.enabled() || groups.len() < 2 {
            return;
        }
        let len = first.end - first.start;
        let mut room = (self.env.cache.budget() / 2 / len.max(1)).saturating_sub(1);
        for grp in &groups[1..] {
            if room == 0 {
                return;
            }
            if grp.ctx.missing(grp.i) {
                if !grp.ctx.queue(grp.i) {
                    return;
                }
                room -= 1;
            }
        }
    }

    /// Copy a group's runs out of its block (decoded once, whole, into the
    /// cache if missing). A block whose last bytes were read goes first
    /// when the cache must make room: a sequential reader is done with it.
    fn serve_group(&self, grp: &Group, short: &[Piece], out: &mut [u8]) -> Result<()> {
        let block = grp
            .ctx
            .cached_block(grp.i)
            .map_err(|e| e.in_chunk(grp.chunk).in_file(&self.path))?;
        let runs = &short[grp.runs.clone()];
        for p in runs {
            let o = (p.raw - grp.start) as usize;
            out[p.pos..p.pos + p.len].copy_from_slice(&block[o..o + p.len]);
        }
        if runs.last().is_some_and(|p| p.raw + p.len as u64 == grp.end) {
            self.env.cache.demote(&grp.ctx.key(grp.i));
        }
        Ok(())
    }
}

/// The short runs of a request that lie in one block.
struct Group {
    ctx: ChunkCtx,
    /// The chunk's number (for messages).
    chunk: u64,
    i: u32,
    /// Raw offsets of the block.
    start: u64,
    end: u64,
    /// Its runs in the sorted list.
    runs: std::ops::Range<usize>,
}

impl ChunkCtx {
    /// Is block `i` being decoded (by the runner or another reader) now?
    fn running(&self, i: u32) -> bool {
        self.env
            .ahead
            .lookup(&self.key(i))
            .is_some_and(|s| self.env.ahead.running(&s))
    }
}
