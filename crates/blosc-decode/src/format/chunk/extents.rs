//! Where each block of a chunk lies: memcpyed, compressed (from the block
//! starts, with the dictionary) and variable-length.

use super::{BlockExtent, ChunkHeader, VlBlocks, MAX_MEMCPYED_BLOCKS};
use crate::bytes::{le_all, Reader};
use crate::ensure;
use crate::error::Result;

/// The blocks of a memcpyed chunk: stored one after another, as they are.
pub(super) fn memcpyed_extents(header: &ChunkHeader) -> Result<Vec<BlockExtent>> {
    let nblocks = header.nblocks();
    ensure!(
        header.cbytes as u64 >= header.header_len as u64 + header.nbytes as u64,
        corrupt,
        "memcpyed chunk holds {} bytes, fewer than its nbytes {}",
        header.cbytes as u64 - header.header_len as u64,
        header.nbytes
    );
    ensure!(
        nblocks <= MAX_MEMCPYED_BLOCKS,
        unsupported,
        "memcpyed chunk of {} blocks of {} bytes: more than {MAX_MEMCPYED_BLOCKS} blocks",
        nblocks,
        header.blocksize
    );
    Ok((0..nblocks)
        .map(|i| {
            let start = header.header_len as u32 + i * header.blocksize;
            BlockExtent {
                start,
                end: start + header.fixed_block_len(i),
            }
        })
        .collect())
}

/// The blocks of a compressed chunk from its block starts (`bstarts`),
/// and its dictionary if it has one. Blocks may be stored out of order: a
/// block runs to the next start.
pub(super) fn stored_extents(
    header: &ChunkHeader,
    prefix: &[u8],
) -> Result<(Vec<BlockExtent>, Option<Vec<u8>>)> {
    let (nblocks, cbytes) = (header.nblocks(), header.cbytes);
    let hl = header.header_len;
    let bs_end = hl + 4 * nblocks as usize;
    let mut data_start = bs_end as u32;
    let mut dict = None;
    if header.uses_dict() {
        let mut r = Reader::at(prefix, bs_end, "chunk dictionary");
        let dsize = r.le::<u32>()? as usize;
        dict = Some(r.bytes(dsize)?.to_vec());
        data_start = r.pos() as u32;
    }
    let mut starts: Vec<(u32, u32)> = le_all::<u32>(&prefix[hl..bs_end]).zip(0..).collect();
    for &(s, i) in &starts {
        ensure!(
            s >= data_start && s < cbytes,
            corrupt,
            "block {i} starts at {s}, outside the chunk's data ({data_start}..{cbytes})"
        );
    }
    starts.sort_unstable();
    let mut extents = vec![BlockExtent { start: 0, end: 0 }; nblocks as usize];
    for k in 0..starts.len() {
        let (s, i) = starts[k];
        let end = starts.get(k + 1).map_or(cbytes, |n| n.0);
        extents[i as usize] = BlockExtent { start: s, end };
    }
    Ok((extents, dict))
}

/// The block sizes of a VL-block chunk, read by `vl_sizes`.
pub(super) fn vl_blocks(
    header: &ChunkHeader,
    extents: &[BlockExtent],
    vl_sizes: impl FnOnce(&[BlockExtent]) -> Result<Vec<i32>>,
) -> Result<VlBlocks> {
    VlBlocks::check_extents(extents)?;
    let sizes = vl_sizes(extents)?;
    let vl = VlBlocks::new(header.nbytes, extents, &sizes)?;
    // C-Blosc2 3.3 delta-encodes every VL block against itself but
    // decodes blocks past the first against the chunk's first bytes:
    // no decoder gives back what was written, so nor do we.
    ensure!(
        !(header.has_delta() && extents.len() > 1),
        unsupported,
        "unsupported chunk: delta filter over {} variable-length blocks \
         (C-Blosc2 does not decode these to the data written)",
        extents.len()
    );
    Ok(vl)
}
