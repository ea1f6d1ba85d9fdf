//! Decoding one block of a chunk: streams -> codec -> filters (in reverse).
//!
//! The caller hands over exactly the bytes of the block's extent (see
//! `ChunkLayout`), so a read touches only the blocks it needs.

use crate::codec;
use crate::ensure;
use crate::error::{Error, Result};
use crate::filter;
use crate::format::chunk::{filter_id, ChunkLayout, Special};
use std::cell::RefCell;

thread_local! {
    static SCRATCH: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Fill `out` with the special value of a whole chunk, starting at byte
/// `offset` of the chunk (so repeated multi-byte values stay aligned).
pub fn fill_special(kind: Special, typesize: usize, value: &[u8], offset: u64, out: &mut [u8]) {
    match kind {
        Special::Zeros | Special::Uninit => out.fill(0),
        Special::Nan => {
            let pat: Vec<u8> = if typesize == 4 {
                f32::NAN.to_le_bytes().to_vec()
            } else {
                f64::NAN.to_le_bytes().to_vec()
            };
            fill_pattern(&pat, offset, out)
        }
        Special::Value => fill_pattern(value, offset, out),
    }
}

fn fill_pattern(pat: &[u8], offset: u64, out: &mut [u8]) {
    if pat.is_empty() {
        out.fill(0);
        return;
    }
    let p = pat.len() as u64;
    for (i, b) in out.iter_mut().enumerate() {
        *b = pat[((offset + i as u64) % p) as usize];
    }
}

/// Decode the streams of block `i` (its extent bytes in `data`) into `out`
/// (exactly `block_len(i)` bytes). `block0` must be the decoded block 0 of
/// the same chunk when the chunk uses the delta filter and `i > 0`.
pub fn decode_block(
    layout: &ChunkLayout,
    i: u32,
    data: &[u8],
    block0: Option<&[u8]>,
    out: &mut [u8],
) -> Result<()> {
    let h = &layout.header;
    let bsize = h.block_len(i) as usize;
    ensure!(
        out.len() == bsize,
        corrupt,
        "internal: block buffer of {} bytes for a block of {bsize}",
        out.len()
    );
    if h.memcpyed() {
        ensure!(data.len() >= bsize, truncated, "memcpyed block is short");
        out.copy_from_slice(&data[..bsize]);
        return Ok(());
    }
    let filters: Vec<(u8, u8)> = h.decode_filters().collect();
    let only_noop = filters
        .iter()
        .all(|&(f, _)| f == filter_id::TRUNC_PREC || f == filter_id::INT_TRUNC);
    if only_noop {
        return decode_streams(layout, i, data, out);
    }
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let (a, b) = &mut *s;
        a.resize(bsize, 0);
        b.resize(bsize, 0);
        decode_streams(layout, i, data, a)?;
        // `cur` holds the current data; each filter writes into the other buffer.
        let mut in_a = true;
        for &(f, meta) in &filters {
            let (src, dst) = if in_a {
                (&mut a[..], &mut b[..])
            } else {
                (&mut b[..], &mut a[..])
            };
            let ts = h.typesize as usize;
            match f {
                filter_id::SHUFFLE => {
                    // filters_meta holds extra rounds of shuffling.
                    filter::shuffle::unshuffle(ts, src, dst);
                    in_a = !in_a;
                    for _ in 0..meta {
                        let (src, dst) = if in_a {
                            (&mut a[..], &mut b[..])
                        } else {
                            (&mut b[..], &mut a[..])
                        };
                        filter::shuffle::unshuffle(ts, src, dst);
                        in_a = !in_a;
                    }
                }
                filter_id::BITSHUFFLE => {
                    filter::bitshuffle::bitunshuffle(ts, src, dst, h.version)?;
                    in_a = !in_a;
                }
                filter_id::DELTA => {
                    if i == 0 {
                        filter::delta::decode_ref(ts, src);
                    } else {
                        let r = block0.ok_or_else(|| {
                            Error::corrupt("internal: delta block decoded without block 0")
                        })?;
                        filter::delta::decode_against(ts, r, src);
                    }
                }
                filter_id::BYTEDELTA => {
                    let ts = if meta != 0 { meta as usize } else { ts };
                    filter::bytedelta::decode(ts, src, dst)?;
                    in_a = !in_a;
                }
                filter_id::TRUNC_PREC | filter_id::INT_TRUNC => {}
                other => {
                    return Err(Error::unsupported(format!("unsupported filter {other}")));
                }
            }
        }
        out.copy_from_slice(if in_a { &a[..] } else { &b[..] });
        Ok(())
    })
}

/// Decompress the streams of block `i` into `out` (no filters).
fn decode_streams(layout: &ChunkLayout, i: u32, data: &[u8], out: &mut [u8]) -> Result<()> {
    let h = &layout.header;
    let codec = h.codec()?;
    let nstreams = h.nstreams(i) as usize;
    let bsize = out.len();
    ensure!(
        bsize % nstreams == 0,
        corrupt,
        "block of {bsize} bytes does not split into {nstreams} streams"
    );
    let neblock = bsize / nstreams;
    let dict = layout.dict.as_deref();
    let mut pos = 0usize;
    for j in 0..nstreams {
        let dst = &mut out[j * neblock..(j + 1) * neblock];
        ensure!(
            pos + 4 <= data.len(),
            truncated,
            "stream {j}: size field past the end of the block"
        );
        let csize = i32::from_le_bytes(data[pos..pos + 4].try_into().unwrap());
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
        if csize == neblock {
            dst.copy_from_slice(src);
        } else {
            codec::decompress(codec, src, dst, dict).map_err(|e| Error {
                reason: format!("stream {j}: {}", e.reason),
                ..e
            })?;
        }
    }
    Ok(())
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
    let bs = h.blocksize as usize;
    for i in 0..layout.nblocks() {
        let e = layout.extents[i as usize];
        let data = &chunk[e.start as usize..e.end as usize];
        let start = i as usize * bs;
        let len = h.block_len(i) as usize;
        let (done, rest) = out.split_at_mut(start);
        let block0 = if i > 0 { Some(&done[..bs]) } else { None };
        decode_block(&layout, i, data, block0, &mut rest[..len])
            .map_err(|e| e.in_block(i as u64))?;
    }
    Ok(out)
}
