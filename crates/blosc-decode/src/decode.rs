//! Decoding one block of a chunk: streams -> codec -> filters (in reverse).
//!
//! The caller hands over exactly the bytes of the block's extent (see
//! `ChunkLayout`), so a read touches only the blocks it needs.
//!
//! ```
//! // A Blosc1 chunk storing its 8 bytes as they are (memcpyed).
//! let mut chunk = vec![2, 1, 0x02, 4]; // version, codec version, flags, typesize
//! chunk.extend(8u32.to_le_bytes()); // uncompressed bytes
//! chunk.extend(8u32.to_le_bytes()); // block size
//! chunk.extend(24u32.to_le_bytes()); // compressed bytes
//! chunk.extend([1, 0, 0, 0, 2, 0, 0, 0]);
//! let out = blosc_decode::decode::decompress_chunk(&chunk)?;
//! assert_eq!(out, [1, 0, 0, 0, 2, 0, 0, 0]);
//! # Ok::<(), blosc_decode::Error>(())
//! ```

use crate::bytes::le_at;
use crate::cache::BlockBuf;
use crate::codec;
use crate::ensure;
use crate::error::{Context, Error, Result};
use crate::filter;
use crate::format::chunk::{filter_id, ChunkLayout, Special};
use std::cell::RefCell;

thread_local! {
    /// The filter pipeline's intermediate buffer, kept per thread (the steps
    /// go back and forth between it and the output). A large one is its own
    /// mapping whose pages are only mapped as they are written (a lying
    /// block size costs address space, not memory).
    static SCRATCH: RefCell<BlockBuf> = RefCell::new(spare_or_empty());
}

/// The size of the buffers [`prepare_thread`] maps: python-blosc2's and
/// C-Blosc2's usual blocks fit.
const PREPARED: usize = 256 << 10;

/// Buffers made by [`prepare_spares`] for threads that did not prepare their
/// own, each taken by a thread's first block.
static SPARES: std::sync::Mutex<Vec<BlockBuf>> = std::sync::Mutex::new(Vec::new());

/// A buffer of [`PREPARED`] bytes with its pages mapped.
fn prepared() -> BlockBuf {
    let mut b = BlockBuf::new(PREPARED);
    b.populate();
    b
}

/// A spare prepared buffer, or an empty one.
fn spare_or_empty() -> BlockBuf {
    SPARES
        .lock()
        .ok()
        .and_then(|mut s| s.pop())
        .unwrap_or_else(|| BlockBuf::new(0))
}

/// Map this thread's scratch buffers now (the filter pipeline's and the
/// one a block decoded range first waits in), so that its first blocks pay
/// no page fault per 4 KiB of them.
pub(crate) fn prepare_thread() {
    for cell in [&SCRATCH, &SHUFFLED] {
        cell.with(|c| {
            let mut b = c.borrow_mut();
            if b.capacity() < PREPARED {
                *b = prepared();
            }
        });
    }
}

/// Map the scratch buffers of `threads` threads that will decode without
/// having called [`prepare_thread`].
pub(crate) fn prepare_spares(threads: usize) {
    let made: Vec<BlockBuf> = (0..2 * threads).map(|_| prepared()).collect();
    if let Ok(mut s) = SPARES.lock() {
        s.extend(made);
    }
}

/// Scratch buffers larger than this are given back after each block.
pub(crate) const KEEP_SCRATCH: usize = 4 << 20;

/// Blocks larger than this are decoded one at a time in the whole process
/// (see [`big_block_turn`]).
pub const BIG_BLOCK: usize = 64 << 20;

/// Decoding a block touches up to twice its size (the block and one
/// scratch buffer), and a chunk of 100 bytes may declare blocks of C-Blosc2's
/// 512 MiB maximum (a run-length stream is 5 bytes). Threads decoding such
/// blocks at once would each need a GiB: a block above [`BIG_BLOCK`] waits
/// for its turn (held while it is decoded), so together they never need more
/// than about 1 GiB. Blocks that large are rare in real files (C-Blosc2
/// chooses blocks of a few MiB at most).
pub fn big_block_turn(len: usize) -> Option<parking_lot::MutexGuard<'static, ()>> {
    static TURN: parking_lot::Mutex<()> = parking_lot::const_mutex(());
    (len > BIG_BLOCK).then(|| TURN.lock())
}

/// Make `x` `n` bytes long (contents are garbage), reallocating only to grow.
pub(crate) fn scratch(x: &mut BlockBuf, n: usize) {
    if x.capacity() < n {
        *x = BlockBuf::new(n);
    } else {
        x.set_len(n);
    }
}

/// Fill `out` with the special value of a whole chunk, starting at byte
/// `offset` of the chunk (so repeated multi-byte values stay aligned).
pub fn fill_special(kind: Special, typesize: usize, value: &[u8], offset: u64, out: &mut [u8]) {
    match kind {
        Special::Zeros | Special::Uninit => out.fill(0),
        Special::Nan => fill_pattern(nan_pattern(typesize), offset, out),
        Special::Value => fill_pattern(value, offset, out),
    }
}

/// The bytes a NaN chunk repeats: a float32 NaN for typesize 4, else a
/// float64 NaN (as C-Blosc2 writes them).
pub fn nan_pattern(typesize: usize) -> &'static [u8] {
    const F32: [u8; 4] = f32::NAN.to_le_bytes();
    const F64: [u8; 8] = f64::NAN.to_le_bytes();
    if typesize == 4 {
        &F32
    } else {
        &F64
    }
}

fn fill_pattern(pat: &[u8], offset: u64, out: &mut [u8]) {
    if pat.is_empty() {
        out.fill(0);
        return;
    }
    // One period by hand (in phase with `offset`), then doubling copies.
    let p = pat.len();
    let phase = (offset % p as u64) as usize;
    let first = out.len().min(p);
    for (i, b) in out[..first].iter_mut().enumerate() {
        *b = pat[(phase + i) % p];
    }
    let mut done = first;
    while done < out.len() {
        // `done` is a whole number of periods here, so the copy stays in phase.
        let n = done.min(out.len() - done);
        out.copy_within(..n, done);
        done += n;
    }
}

/// Decode the streams of block `i` (its extent bytes in `data`) into `out`
/// (exactly `layout.block_len(i)` bytes). `block0` must be the decoded block
/// 0 of the same chunk when the chunk uses the delta filter and `i > 0`.
pub fn decode_block(
    layout: &ChunkLayout,
    i: u32,
    data: &[u8],
    block0: Option<&[u8]>,
    out: &mut [u8],
) -> Result<()> {
    let h = &layout.header;
    let bsize = block_len_of(layout, i, out)?;
    if h.memcpyed() {
        ensure!(data.len() >= bsize, truncated, "memcpyed block is short");
        out.copy_from_slice(&data[..bsize]);
        return Ok(());
    }
    let _turn = big_block_turn(bsize);
    let steps = steps(h)?;
    SCRATCH.with(|cell| {
        let mut a = cell.borrow_mut();
        let r = run_steps(layout, i, data, block0, out, &steps, &mut a);
        if a.capacity() > KEEP_SCRATCH {
            *a = BlockBuf::new(0);
        }
        r
    })
}

/// A block decoded a range first: its chunk's only filter step is a byte
/// shuffle (what python-blosc2 writes by default), so its streams decode to
/// the shuffled block and any range of that can be unshuffled alone. A
/// reader of a few KiB of it gets its bytes before the rest of the block is
/// unshuffled.
#[derive(Clone, Copy, Debug)]
pub struct RangeFirst {
    ts: usize,
}

impl RangeFirst {
    /// For block `i` of `layout`, when its pipeline is a lone byte shuffle
    /// and it is not above [`BIG_BLOCK`] (those wait for their turn in
    /// [`decode_block`], and this would unshuffle a second copy of it).
    pub fn of(layout: &ChunkLayout, i: u32) -> Option<RangeFirst> {
        let h = &layout.header;
        if h.memcpyed() || layout.block_len(i) as usize > BIG_BLOCK {
            return None;
        }
        match steps(h).ok()?.as_slice() {
            [Step::Unshuffle(t)] if *t >= 2 => Some(RangeFirst { ts: *t }),
            _ => None,
        }
    }

    /// Decode the streams of block `i` (its extent bytes in `data`) and
    /// unshuffle bytes `lo..lo + dst.len()` of it into `dst`; the rest of
    /// the block waits in what is returned.
    pub fn decode(
        self,
        layout: &ChunkLayout,
        i: u32,
        data: &[u8],
        lo: usize,
        dst: &mut [u8],
    ) -> Result<ShuffledBlock> {
        let len = layout.block_len(i) as usize;
        ensure!(
            lo.checked_add(dst.len()).is_some_and(|hi| hi <= len),
            corrupt,
            "internal: bytes {lo}.. (+{}) of a block of {len}",
            dst.len()
        );
        let mut buf = SHUFFLED.with(|p| std::mem::replace(&mut *p.borrow_mut(), BlockBuf::new(0)));
        scratch(&mut buf, len);
        decode_streams(layout, i, data, &mut buf)?;
        filter::shuffle::unshuffle_range(self.ts, &buf, lo, dst);
        Ok(ShuffledBlock { buf, ts: self.ts })
    }
}

thread_local! {
    /// The buffer of the thread's last [`ShuffledBlock`], kept for its next
    /// one (up to [`KEEP_SCRATCH`]).
    static SHUFFLED: RefCell<BlockBuf> = RefCell::new(spare_or_empty());
}

/// A block decoded but for its byte shuffle (see [`RangeFirst`]).
pub struct ShuffledBlock {
    buf: BlockBuf,
    ts: usize,
}

impl ShuffledBlock {
    /// Unshuffle the whole block into `out` (exactly the block's length).
    pub fn unshuffle(self, out: &mut [u8]) {
        filter::shuffle::unshuffle(self.ts, &self.buf, out);
        if self.buf.capacity() <= KEEP_SCRATCH {
            SHUFFLED.with(|p| *p.borrow_mut() = self.buf);
        }
    }
}

/// The size of block `i`, which the buffer `out` given for it must have.
fn block_len_of(layout: &ChunkLayout, i: u32, out: &[u8]) -> Result<usize> {
    let bsize = layout.block_len(i) as usize;
    ensure!(
        out.len() == bsize,
        corrupt,
        "internal: block buffer of {} bytes for a block of {bsize}",
        out.len()
    );
    Ok(bsize)
}

/// The filter pipeline of one block: the streams are decoded into `out` or
/// the scratch buffer `a` (sized here: a block, or nothing when no step
/// moves bytes), and each step that moves bytes goes from one to the other,
/// chosen so that the last writes into `out` (no final copy). Delta steps
/// work in place.
fn run_steps(
    layout: &ChunkLayout,
    i: u32,
    data: &[u8],
    block0: Option<&[u8]>,
    out: &mut [u8],
    steps: &[Step],
    a: &mut BlockBuf,
) -> Result<()> {
    let h = &layout.header;
    let moving = steps.iter().filter(|s| !matches!(s, Step::Delta)).count();
    scratch(a, if moving > 0 { out.len() } else { 0 });
    let a: &mut [u8] = a;
    // Where the streams go: an even number of moves from `out` lands there.
    let mut in_out = moving % 2 == 0;
    if in_out {
        decode_streams(layout, i, data, out)?;
    } else {
        decode_streams(layout, i, data, a)?;
    }
    let ts = h.typesize as usize;
    for step in steps {
        let (src, dst): (&mut [u8], &mut [u8]) = if in_out {
            (&mut *out, &mut *a)
        } else {
            (&mut *a, &mut *out)
        };
        match step {
            Step::Delta => {
                delta_step(ts, i, block0, src)?;
                continue;
            }
            Step::Unshuffle(t) => filter::shuffle::unshuffle(*t, src, dst),
            Step::Bitunshuffle => filter::bitshuffle::bitunshuffle(ts, src, dst, h.version)?,
            Step::Bytedelta(t) => filter::bytedelta::decode(*t, src, dst)?,
        }
        in_out = !in_out;
    }
    debug_assert!(in_out, "the last step writes into the output");
    Ok(())
}

/// One decode step of the filter pipeline.
#[derive(Debug, Clone, Copy)]
enum Step {
    Unshuffle(usize),
    Bitunshuffle,
    Bytedelta(usize),
    /// In place, against block 0.
    Delta,
}

/// The chunk's filters as decode steps (slot 5 down to 0), unknown ids refused.
fn steps(h: &crate::format::chunk::ChunkHeader) -> Result<Vec<Step>> {
    let mut v = Vec::new();
    for (f, meta) in h.decode_filters() {
        match f {
            // C-Blosc2 3.x: a nonzero filters_meta is the element size the
            // shuffle worked on (python-blosc2 sets it to the base itemsize
            // of e.g. unicode and structured dtypes).
            filter_id::SHUFFLE => v.push(Step::Unshuffle(if meta != 0 {
                meta as usize
            } else {
                h.typesize as usize
            })),
            filter_id::BITSHUFFLE => v.push(Step::Bitunshuffle),
            filter_id::DELTA => v.push(Step::Delta),
            filter_id::BYTEDELTA => v.push(Step::Bytedelta(if meta != 0 {
                meta as usize
            } else {
                h.typesize as usize
            })),
            filter_id::TRUNC_PREC | filter_id::INT_TRUNC => {}
            other => return Err(Error::unsupported(format!("unsupported filter {other}"))),
        }
    }
    Ok(v)
}

fn delta_step(ts: usize, i: u32, block0: Option<&[u8]>, data: &mut [u8]) -> Result<()> {
    filter::delta::check_whole(ts, data.len()).map_err(Error::unsupported)?;
    if i == 0 {
        filter::delta::decode_ref(ts, data);
    } else {
        let r = block0
            .ok_or_else(|| Error::corrupt("internal: delta block decoded without block 0"))?;
        filter::delta::decode_against(ts, r, data);
    }
    Ok(())
}

/// Decompress the streams of block `i` into `out` (no filters).
fn decode_streams(layout: &ChunkLayout, i: u32, data: &[u8], out: &mut [u8]) -> Result<()> {
    if layout.vl.is_some() {
        return decode_vl_stream(layout, data, out);
    }
    let h = &layout.header;
    let codec = h.codec()?;
    let nstreams = h.nstreams(i) as usize;
    let bsize = out.len();
    // A split block whose size is not a multiple of the typesize keeps the
    // remaining bytes in one more stream (as C-Blosc2 3.x writes it).
    let neblock = bsize / nstreams;
    let rest = bsize - neblock * nstreams;
    let total = nstreams + usize::from(rest > 0);
    let params = codec_params(layout);
    let mut pos = 0usize;
    for j in 0..total {
        let start = j * neblock;
        let end = if j < nstreams { start + neblock } else { bsize };
        let dst = &mut out[start..end];
        let csize: i32 = le_at(data, pos).ok_or_else(|| {
            Error::truncated(format!("stream {j}: size field past the end of the block"))
        })?;
        pos += 4;
        if csize == 0 {
            dst.fill(0);
            continue;
        }
        if csize < 0 {
            ensure!(pos < data.len(), truncated, "stream {j}: missing run token");
            let token = data[pos];
            pos += 1;
            ensure!(
                token & 1 != 0,
                unsupported,
                "stream {j}: unsupported stream token {token:#x}"
            );
            // A run repeats one byte: its size field is minus that byte.
            ensure!(
                csize >= -255,
                corrupt,
                "stream {j}: size {csize} is not a run's (-1 to -255: minus the byte repeated)"
            );
            dst.fill(csize.unsigned_abs() as u8);
            continue;
        }
        let csize = csize as usize;
        ensure!(
            csize <= data.len() - pos,
            truncated,
            "stream {j}: {csize} compressed bytes past the end of the block"
        );
        let src = &data[pos..pos + csize];
        pos += csize;
        if csize == dst.len() {
            dst.copy_from_slice(src);
        } else {
            codec::decompress(codec, src, dst, &params).context(format_args!("stream {j}"))?;
        }
    }
    Ok(())
}

/// Decompress the one stream of a VL block into `out`: its size field holds
/// the block's size, and its compressed bytes run to the end of the block's
/// extent (stored raw when they are as many as the block's).
fn decode_vl_stream(layout: &ChunkLayout, data: &[u8], out: &mut [u8]) -> Result<()> {
    let (size, src) = match (le_at::<i32>(data, 0), data.get(4..)) {
        (Some(size), Some(src)) if !src.is_empty() => (size, src),
        _ => {
            return Err(Error::truncated(format!(
                "VL block of {} stored bytes has no data after its size field",
                data.len()
            )))
        }
    };
    ensure!(
        size as i64 == out.len() as i64,
        corrupt,
        "VL block size field {size}, but the block holds {} bytes",
        out.len()
    );
    if src.len() == out.len() {
        out.copy_from_slice(src);
        return Ok(());
    }
    let codec = layout.header.codec()?;
    codec::decompress(codec, src, out, &codec_params(layout))
}

/// What the codec of `layout`'s streams needs besides a stream.
fn codec_params(layout: &ChunkLayout) -> codec::Params<'_> {
    codec::Params {
        dict: layout.dict.as_deref(),
        meta: layout.header.compcode_meta,
        typesize: layout.header.typesize,
        block_shape: layout.block_shape.as_deref(),
    }
}

/// Decode a whole chunk held in memory (used for small structures such as
/// frame offset indexes and metalayer values, and by tests).
pub fn decompress_chunk(chunk: &[u8]) -> Result<Vec<u8>> {
    let layout = ChunkLayout::parse(chunk)?;
    let h = &layout.header;
    ensure!(
        chunk.len() >= h.cbytes as usize,
        truncated,
        "chunk declares {} bytes but {} are present",
        h.cbytes,
        chunk.len()
    );
    let mut out = vec![0u8; h.nbytes as usize];
    if let Some(kind) = layout.special {
        fill_special(kind, h.typesize as usize, &layout.value, 0, &mut out);
        return Ok(out);
    }
    let len0 = layout.block_len(0) as usize;
    for i in 0..layout.nblocks() {
        let e = layout.extents[i as usize];
        let data = &chunk[e.start as usize..e.end as usize];
        let start = layout.block_start(i) as usize;
        let len = layout.block_len(i) as usize;
        let (done, rest) = out.split_at_mut(start);
        let block0 = if i > 0 { Some(&done[..len0]) } else { None };
        decode_block(&layout, i, data, block0, &mut rest[..len]).in_block(i as u64)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::fill_pattern;

    /// Are all of `b`'s pages in memory (`mincore`)?
    fn resident(b: &[u8]) -> bool {
        let page = crate::io::page_size() as usize;
        let start = b.as_ptr() as usize / page * page;
        let n = (b.as_ptr() as usize + b.len() - start).div_ceil(page);
        let mut v = vec![0u8; n];
        // SAFETY: a range of our own mapping, one byte per page in `v`.
        let r = unsafe { libc::mincore(start as *mut libc::c_void, n * page, v.as_mut_ptr()) };
        r == 0 && v.iter().all(|&x| x & 1 == 1)
    }

    /// A thread that decodes without having prepared itself takes scratch
    /// buffers `prepare_spares` mapped: its first blocks fault in no page
    /// of them. (Other tests' threads may take some of the spares: more
    /// are made than this test needs.)
    #[test]
    fn a_thread_takes_prepared_scratch_buffers() {
        super::prepare_spares(16);
        std::thread::spawn(|| {
            for cell in [&super::SCRATCH, &super::SHUFFLED] {
                cell.with(|c| {
                    let b = c.borrow();
                    assert!(b.capacity() >= super::PREPARED, "{}", b.capacity());
                    assert!(resident(&b[..]));
                });
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn fill_pattern_is_the_pattern_repeated_from_offset() {
        let pats: [&[u8]; 4] = [
            b"\x01",
            b"\x01\x02\x03",
            &[0x00, 0x00, 0xc0, 0x7f],
            b"abcdefghijk",
        ];
        for pat in pats {
            for offset in [0u64, 1, 2, 5, 11, 1 << 40] {
                for len in [0usize, 1, 2, 3, 4, 7, 8, 12, 100, 4097] {
                    let mut out = vec![0xeeu8; len];
                    fill_pattern(pat, offset, &mut out);
                    let want: Vec<u8> = (0..len as u64)
                        .map(|i| pat[((offset + i) % pat.len() as u64) as usize])
                        .collect();
                    assert_eq!(out, want, "pattern {pat:?} offset {offset} len {len}");
                }
            }
        }
    }
}
