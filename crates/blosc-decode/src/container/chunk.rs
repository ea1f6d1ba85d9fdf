//! Reading bytes of one chunk: its special value, or the blocks the range
//! touches — whole blocks decoded straight into the caller's buffer, parts
//! of blocks copied from the cache or answered a range first.

use super::Container;
use crate::cache::{Block, BlockKey, Stats};
use crate::decode::{self, RangeFirst};
use crate::deferred::{Deferred, Job};
use crate::error::Result;
use crate::format::chunk::{ChunkLayout, Special};
use crate::index::ChunkLoc;
use crate::io::Source;
use crate::Env;
use std::cell::RefCell;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

thread_local! {
    /// The stored bytes of the blocks being decoded (kept for the thread's
    /// next read).
    static READBUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The largest part of a block answered before the block is cached
/// (`ChunkCtx::read_part`; also at most a quarter of the block). Larger
/// parts are mostly one end of a sequential reader's request, whose next
/// request wants the rest of the block: those blocks are decoded whole and
/// cached before the reply.
const PART_MAX: usize = 64 << 10;

/// What decoding blocks of one stored chunk needs, without the container
/// (decode-ahead jobs and deferred work carry one).
#[derive(Clone)]
pub(super) struct ChunkCtx {
    pub(super) id: u64,
    /// The chunk's number in its blocks' cache keys.
    pub(super) ci: u64,
    pub(super) layout: Arc<ChunkLayout>,
    pub(super) source: Arc<dyn Source>,
    pub(super) offset: u64,
    pub(super) env: Env,
    pub(super) src_end: Arc<AtomicU64>,
}

impl Container {
    pub(super) fn ctx(
        &self,
        ci: usize,
        layout: Arc<ChunkLayout>,
        src: u32,
        offset: u64,
    ) -> ChunkCtx {
        ChunkCtx {
            id: self.id,
            ci: self.key_chunk.wrapping_add(ci as u64),
            layout,
            source: self.index.sources[src as usize].clone(),
            offset,
            env: self.env.clone(),
            src_end: self.src_end.clone(),
        }
    }

    /// Read bytes `a..a+out.len()` of chunk `ci`.
    pub(super) fn read_chunk(
        &self,
        ci: usize,
        a: u64,
        out: &mut [u8],
        later: &mut Deferred,
    ) -> Result<()> {
        let (src, offset) = match &self.chunks()[ci].loc {
            ChunkLoc::Special {
                kind,
                typesize,
                value,
            } => {
                self.check_fetched(ci, a, out.len() as u64, None)?;
                self.fill_special(*kind, *typesize as usize, value, a, out);
                return Ok(());
            }
            ChunkLoc::Stored { src, offset, .. } => (*src, *offset),
        };
        let layout = self.layout(ci)?;
        self.check_fetched(ci, a, out.len() as u64, Some(&layout))?;
        if let Some(kind) = layout.special {
            let ts = layout.header.typesize as usize;
            self.fill_special(kind, ts, &layout.value, a, out);
            return Ok(());
        }
        self.ctx(ci, layout, src, offset).read_blocks(a, out, later)
    }

    fn fill_special(&self, kind: Special, typesize: usize, value: &[u8], a: u64, out: &mut [u8]) {
        decode::fill_special(kind, typesize, value, a, out);
        Stats::add(&self.env.stats.special_bytes_served, out.len() as u64);
    }
}

impl ChunkCtx {
    pub(super) fn key(&self, i: u32) -> BlockKey {
        (self.id, self.ci, i)
    }

    /// Does decoding a block other than 0 need decoded block 0?
    pub(super) fn delta(&self) -> bool {
        self.layout.header.has_delta() && !self.layout.header.memcpyed()
    }

    /// Fill `out` with bytes `a..a + out.len()` of the chunk.
    fn read_blocks(&self, a: u64, out: &mut [u8], later: &mut Deferred) -> Result<()> {
        let l = &self.layout;
        let end = a + out.len() as u64;
        let last = l.block_at(end - 1);
        let mut block0: Option<Block> = None;
        let mut wrote = 0usize;
        let mut i = l.block_at(a);
        self.announce(i, last);
        while i <= last {
            let bstart = l.block_start(i);
            let lo = a.max(bstart) - bstart;
            let n = (end.min(bstart + l.block_len(i) as u64) - bstart - lo) as usize;
            let dst = &mut out[wrote..];
            if !self.whole(i, a, end) {
                self.read_part_of(i, lo as usize, &mut dst[..n], later)?;
                wrote += n;
                i += 1;
                continue;
            }
            if self.delta() && block0.is_none() {
                block0 = Some(self.cached_block(0)?);
            }
            let b0 = block0.as_ref().map(|b| &b[..]);
            let j = self.read_whole(i, last, (a, end), b0, dst)?;
            wrote += (l.block_start(j) + l.block_len(j) as u64 - bstart) as usize;
            i = j + 1;
        }
        Ok(())
    }

    /// Tell a source that joins reads (a remote one) that the stored bytes
    /// of blocks `i..=last` will be read, when more than one of them is
    /// neither cached nor queued: it fetches them in one request, not one
    /// per block. A local file would ignore it: no cache lookups for it.
    fn announce(&self, i: u32, last: u32) {
        // A one-block request (most small reads) has nothing to join.
        if last <= i || !self.source.joins_reads() {
            return;
        }
        let (mut n, mut start, mut end) = (0, u32::MAX, 0);
        for k in (i..=last).filter(|&k| self.missing(k)) {
            let e = self.layout.extents[k as usize];
            (n, start, end) = (n + 1, start.min(e.start), end.max(e.end));
        }
        if n >= 2 {
            let len = u64::from(end.saturating_sub(start));
            self.source.will_read(self.offset + u64::from(start), len);
        }
    }

    /// Is block `i` wholly inside `a..end` (and decodable in place: block 0
    /// of a delta chunk is needed by the others, so it is cached)?
    fn whole(&self, i: u32, a: u64, end: u64) -> bool {
        let s = self.layout.block_start(i);
        s >= a && s + self.layout.block_len(i) as u64 <= end && !(self.delta() && i == 0)
    }

    /// Fill `dst` with bytes `lo..` of block `i`: a range first, or copied
    /// from the block (cached, or decoded whole into the cache).
    fn read_part_of(&self, i: u32, lo: usize, dst: &mut [u8], later: &mut Deferred) -> Result<()> {
        if self.read_part(i, lo, dst, later)? {
            return Ok(());
        }
        let block = self.cached_block(i)?;
        dst.copy_from_slice(&block[lo..lo + dst.len()]);
        Ok(())
    }

    /// Fill `dst` with whole blocks from `i` on (up to `last`, inside the
    /// request `range`): block `i` from the cache or the runner, or decoded in
    /// place with the adjacent whole blocks that nobody else has (one
    /// positional read for them all). Returns the last block filled.
    fn read_whole(
        &self,
        i: u32,
        last: u32,
        range: (u64, u64),
        block0: Option<&[u8]>,
        dst: &mut [u8],
    ) -> Result<u32> {
        let l = &self.layout;
        if self.take_ready(i, &mut dst[..l.block_len(i) as usize], block0)? {
            return Ok(i);
        }
        let mut j = i;
        while j < last
            && self.whole(j + 1, range.0, range.1)
            && l.extents[(j + 1) as usize].start == l.extents[j as usize].end
            && self.missing(j + 1)
        {
            j += 1;
        }
        let run_len = (l.block_start(j) + l.block_len(j) as u64 - l.block_start(i)) as usize;
        self.decode_run(i, j, block0, &mut dst[..run_len])?;
        Ok(j)
    }

    /// Decode whole blocks `i..=j` (adjacent in the source) into `dst`.
    pub(super) fn decode_run(
        &self,
        i: u32,
        j: u32,
        block0: Option<&[u8]>,
        dst: &mut [u8],
    ) -> Result<()> {
        let l = &self.layout;
        let base = l.block_start(i);
        self.read_extents(i, j, |span| {
            let first = l.extents[i as usize].start;
            for k in i..=j {
                let e = l.extents[k as usize];
                let data = &span[(e.start - first) as usize..(e.end - first) as usize];
                let o = (l.block_start(k) - base) as usize;
                let d = &mut dst[o..o + l.block_len(k) as usize];
                decode::decode_block(l, k, data, block0, d).map_err(|e| e.in_block(k as u64))?;
                Stats::add(&self.env.stats.blocks_decoded, 1);
            }
            Ok(())
        })
    }

    /// Read the stored bytes of blocks `i..=j` (adjacent in the source) with
    /// one positional read and hand them to `f`.
    fn read_extents<R>(&self, i: u32, j: u32, f: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        let l = &self.layout;
        let span_start = l.extents[i as usize].start as u64;
        let len = (l.extents[j as usize].end as u64 - span_start) as usize;
        let at = self.offset + span_start;
        READBUF.with(|rb| {
            // Taken already: the source reads through another container on
            // this thread (a leaf of an EmbedStore); this read gets its own.
            let (mut own, mut kept);
            let rb: &mut Vec<u8> = match rb.try_borrow_mut() {
                Ok(b) => {
                    kept = b;
                    &mut kept
                }
                Err(_) => {
                    own = Vec::new();
                    &mut own
                }
            };
            let (span, direct) = self.source.read_span(at, len, self.access(at, len), rb)?;
            Stats::add(&self.env.stats.source_bytes_read, len as u64);
            if direct {
                Stats::add(&self.env.stats.source_direct_reads, 1);
            }
            f(&span)
        })
    }

    /// Fill `dst` with bytes `lo..` of block `i` and leave the rest of the
    /// block to `later`, when that applies: `dst` is small (at most
    /// [`PART_MAX`] and a quarter of the block), the block is neither cached
    /// nor queued nor pending in `later` already, `later` has room for it,
    /// and the block decodes a range first ([`RangeFirst`]). Its streams are
    /// decoded and only `dst`'s bytes unshuffled; unshuffling the whole
    /// block into the cache is deferred. False when this does not apply
    /// (the caller decodes the block whole).
    fn read_part(&self, i: u32, lo: usize, dst: &mut [u8], later: &mut Deferred) -> Result<bool> {
        let len = self.layout.block_len(i) as usize;
        let key = self.key(i);
        if dst.len() > PART_MAX
            || dst.len() > len / 4
            || !later.room(len)
            || later.pending(&key)
            || !self.missing(i)
        {
            return Ok(false);
        }
        let Some(first) = RangeFirst::of(&self.layout, i) else {
            return Ok(false);
        };
        Stats::add(&self.env.stats.cache_misses, 1);
        let rest = self.read_extents(i, i, |data| {
            first
                .decode(&self.layout, i, data, lo, dst)
                .map_err(|e| e.in_block(i as u64))
        })?;
        Stats::add(&self.env.stats.blocks_decoded, 1);
        let me = self.clone();
        let job: Job = Box::new(move || {
            let mut out = me.buffer(len);
            rest.unshuffle(&mut out);
            me.env.cache.insert(me.key(i), Arc::new(out));
        });
        if let Err(job) = later.defer(key, len, job) {
            job();
        }
        Ok(true)
    }
}
