//! Variable-length-block (VL-block) chunks: where each block lies in the
//! chunk's uncompressed content.
//!
//! A Blosc2 chunk whose `blosc2_flags2` bit 0 is set (format version 6,
//! C-Blosc2 3.x; python-blosc2's BatchArray writes them) holds blocks of
//! differing sizes. Its header's `blocksize` field is the number of blocks;
//! each block has a `bstarts` entry and is one stream whose int32 size field
//! holds the block's uncompressed size (its compressed bytes run to the next
//! block's start, or to `cbytes` for the last). C-Blosc2 requires the starts
//! to increase block by block and the sizes to add up to the chunk's
//! `nbytes`; so does this parser, so that a block's place in the content is
//! known from the sizes alone (prefix sums) and a read decodes only the
//! blocks it touches.

use super::chunk::BlockExtent;
use crate::bytes::le_at;
use crate::error::{Error, Result};

/// The uncompressed geometry of a VL-block chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlBlocks {
    /// `ends[i]`: where block `i` ends in the chunk's content (prefix sums of
    /// the block sizes; the last is `nbytes`).
    ends: Vec<u32>,
}

/// A stream's size field and at least one byte of data.
const MIN_STORED: u32 = 5;

impl VlBlocks {
    /// Check the extents of a VL chunk's blocks (in block order, as `bstarts`
    /// gives them), before their size fields are read: each starts after the
    /// one before and holds a size field and some data.
    pub fn check_extents(extents: &[BlockExtent]) -> Result<()> {
        // The order first: out of order, a block's extent runs to another's.
        for (i, w) in extents.windows(2).enumerate() {
            if w[1].start <= w[0].start {
                return Err(Error::corrupt(format!(
                    "VL block starts at {}, not after block {i}'s start {}",
                    w[1].start, w[0].start
                ))
                .in_block(i as u64 + 1));
            }
        }
        for (i, e) in extents.iter().enumerate() {
            let bad = |reason: String| Err(Error::corrupt(reason).in_block(i as u64));
            if e.end < e.start || e.end - e.start < MIN_STORED {
                return bad(format!(
                    "VL block of {} stored bytes (at {}..{}): too few for its size field and data",
                    e.end.saturating_sub(e.start),
                    e.start,
                    e.end
                ));
            }
        }
        Ok(())
    }

    /// The blocks of a chunk of `nbytes` bytes: `extents` (checked by
    /// [`VlBlocks::check_extents`]) and `sizes`, the size field at the start
    /// of each block's stream. The one allocation is one entry per extent,
    /// which the caller has already bounded by the chunk's bytes.
    pub fn new(nbytes: u32, extents: &[BlockExtent], sizes: &[i32]) -> Result<VlBlocks> {
        Self::check_extents(extents)?;
        if sizes.len() != extents.len() {
            return Err(Error::corrupt(format!(
                "internal: {} VL-block sizes for {} blocks",
                sizes.len(),
                extents.len()
            )));
        }
        let mut ends = Vec::with_capacity(extents.len());
        let mut total = 0u64;
        for (i, &size) in sizes.iter().enumerate() {
            let bad = |reason: String| Err(Error::corrupt(reason).in_block(i as u64));
            if size <= 0 {
                return bad(format!("VL block size field is {size}: not positive"));
            }
            total += size as u64;
            if total > nbytes as u64 {
                return bad(format!(
                    "VL block sizes reach {total} bytes, more than the chunk's nbytes {nbytes}"
                ));
            }
            ends.push(total as u32);
        }
        if total != nbytes as u64 {
            return Err(Error::corrupt(format!(
                "VL block sizes add up to {total} bytes, not the chunk's nbytes {nbytes}"
            )));
        }
        Ok(VlBlocks { ends })
    }

    /// Number of blocks.
    pub fn nblocks(&self) -> u32 {
        self.ends.len() as u32
    }

    /// Where block `i` starts in the chunk's content.
    pub fn start(&self, i: u32) -> u32 {
        match i {
            0 => 0,
            _ => self.ends[i as usize - 1],
        }
    }

    /// Uncompressed size of block `i`.
    pub fn len(&self, i: u32) -> u32 {
        self.ends[i as usize] - self.start(i)
    }

    /// No blocks?
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The block holding content byte `off` (the last block if past the end).
    pub fn block_at(&self, off: u64) -> u32 {
        let k = self.ends.partition_point(|&e| e as u64 <= off);
        k.min(self.ends.len().saturating_sub(1)) as u32
    }
}

/// Read the size fields of a VL chunk's blocks (`extents`, checked by
/// [`VlBlocks::check_extents`]) from bytes of the chunk at hand (`chunk`:
/// from the chunk's start, maybe only a prefix of it).
pub fn sizes_from(chunk: &[u8], extents: &[BlockExtent]) -> Result<Vec<i32>> {
    let mut sizes = Vec::with_capacity(extents.len());
    for (i, e) in extents.iter().enumerate() {
        let at = e.start as usize;
        let size = le_at::<i32>(chunk, at).ok_or_else(|| {
            Error::truncated(format!(
                "VL block size field at {at} is past the {} bytes at hand",
                chunk.len()
            ))
            .in_block(i as u64)
        })?;
        sizes.push(size);
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(v: &[(u32, u32)]) -> Vec<BlockExtent> {
        v.iter()
            .map(|&(start, end)| BlockExtent { start, end })
            .collect()
    }

    #[test]
    fn prefix_sums_place_every_byte() {
        let v = VlBlocks::new(10, &ext(&[(40, 50), (50, 60), (60, 70)]), &[1, 7, 2]).unwrap();
        assert_eq!(v.nblocks(), 3);
        assert_eq!((v.start(0), v.len(0)), (0, 1));
        assert_eq!((v.start(1), v.len(1)), (1, 7));
        assert_eq!((v.start(2), v.len(2)), (8, 2));
        let at: Vec<u32> = (0..10).map(|o| v.block_at(o)).collect();
        assert_eq!(at, [0, 1, 1, 1, 1, 1, 1, 1, 2, 2]);
    }

    #[test]
    fn lying_fields_are_refused_naming_the_block() {
        let e = ext(&[(40, 50), (50, 60)]);
        let err = |n, e: &[BlockExtent], s: &[i32]| VlBlocks::new(n, e, s).unwrap_err();
        let x = err(10, &e, &[4, 7]);
        assert_eq!(x.block, Some(1));
        assert!(x.reason.contains("more than the chunk's nbytes 10"), "{x}");
        assert!(err(10, &e, &[4, 5]).reason.contains("add up to 9"));
        assert_eq!(err(10, &e, &[0, 10]).block, Some(0));
        assert_eq!(err(10, &e, &[-3, 13]).block, Some(0));
        assert_eq!(err(10, &e, &[i32::MAX, i32::MAX]).block, Some(0));
        let back = ext(&[(50, 60), (40, 50)]);
        assert_eq!(err(10, &back, &[5, 5]).block, Some(1));
        let short = ext(&[(40, 44), (44, 60)]);
        assert!(err(10, &short, &[5, 5]).reason.contains("too few"));
        assert!(err(10, &e, &[10]).reason.contains("internal"));
    }

    #[test]
    fn size_fields_past_the_bytes_are_truncation() {
        let mut chunk = vec![0u8; 46];
        chunk[40..44].copy_from_slice(&3i32.to_le_bytes());
        let e = ext(&[(40, 44), (44, 60)]);
        let x = sizes_from(&chunk, &e).unwrap_err();
        assert_eq!(x.block, Some(1));
        assert_eq!(sizes_from(&chunk, &e[..1]).unwrap(), [3]);
    }
}
