//! Holes: presented bytes that come from all-zero chunks, which a read can
//! answer without decoding and `SEEK_HOLE` / `SEEK_DATA` skip over.

use super::table::chunk_at;
use super::{Container, View};
use crate::error::Result;
use crate::index::{ChunkEntry, ChunkLoc};

impl Container {
    /// Are presented bytes `offset..offset+len` all in zero chunks, as known
    /// from the index or chunk headers already read (nothing is read or
    /// decoded)? A read of a hole can then be answered without writing zeros.
    pub fn is_zero(&self, offset: u64, len: u64) -> bool {
        let header = self.view.header_len();
        if len == 0 || offset < header || offset.saturating_add(len) > self.len() {
            return false;
        }
        self.raw_runs(offset, len, |raw, n| self.raw_is_zero(raw, n))
    }

    /// Where the first hole (`hole`) or the first data at or after presented
    /// byte `offset` (below the length) starts: the end of the file counts
    /// as a hole, and `None` means no data follows. Zero chunks are holes
    /// (stored chunks' headers are read to tell); in a `.npy` view, which
    /// does not map linearly onto chunks, everything is data.
    pub fn seek_hole_or_data(&self, offset: u64, hole: bool) -> Result<Option<u64>> {
        if !matches!(self.view, View::Raw) {
            return Ok(Some(if hole { self.len() } else { offset }));
        }
        let chunks = self.checked_chunks()?;
        let start = chunk_at(chunks, offset);
        for (ci, e) in chunks.iter().enumerate().skip(start) {
            // (An unreadable header counts as data.)
            if self.zero_chunk(ci, e, true) == hole {
                return Ok(Some(e.uoff.max(offset)));
            }
        }
        Ok(hole.then(|| self.len()))
    }

    fn raw_is_zero(&self, off: u64, len: u64) -> bool {
        let end = off.saturating_add(len);
        if len == 0 || end > self.raw_len() {
            return false;
        }
        let Ok(chunks) = self.table_to(off, end) else {
            return false;
        };
        let from = chunk_at(chunks, off);
        chunks
            .iter()
            .enumerate()
            .skip(from)
            .take_while(|(_, e)| e.uoff < end)
            .all(|(ci, e)| self.zero_chunk(ci, e, false))
    }

    /// Is chunk `ci` (table entry `e`) all zeros: a special zero chunk, or
    /// a stored chunk whose header says so (read now if `read`, else only
    /// if it was read already), and not a cache's chunk never fetched?
    fn zero_chunk(&self, ci: usize, e: &ChunkEntry, read: bool) -> bool {
        let special = match &e.loc {
            ChunkLoc::Special { kind, .. } => Some(*kind),
            ChunkLoc::Stored { .. } if read => self.layout(ci).ok().and_then(|l| l.special),
            ChunkLoc::Stored { .. } => self.loaded_layout(ci).and_then(|l| l.special),
        };
        special.is_some_and(|k| k.is_zeros()) && self.entry_fetched(ci)
    }
}
