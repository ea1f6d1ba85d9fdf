//! Chunk tables whose sizes are assumed rather than read. A frame of fixed
//! chunk size gives every chunk that size (the last one what is left), but
//! python-blosc2 2.2 to 4.0 keep the fixed size in the header when a shorter
//! chunk is appended or inserted anywhere but at the end: each chunk's own
//! header then says where the next one starts. [`Sizes`] checks the stored
//! chunks' own sizes in order, before any later entry's place is trusted,
//! and at the first that disagrees rebuilds the table from every chunk's own
//! size; those must add up to the frame's declared size, or the chunks past
//! the disagreement cannot be served.
//!
//! The check costs nothing more for a reader going front to back (each
//! chunk's header is read before its blocks anyway), and one 16-byte header
//! read per chunk passed over for a first read far into the file.

use crate::ensure;
use crate::error::{Error, Result};
use crate::index::{ChunkEntry, ChunkLoc};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Does a frame of fixed chunk size `chunksize`, `nbytes` long, need its
/// chunks' sizes checked? Not when `nbytes` is a whole number of chunks:
/// with as many chunks as that takes (the frame opener checks the count)
/// and sizes that add up to `nbytes`, none of at most `chunksize` can be
/// short. Nor with one chunk.
pub fn need_check(chunksize: u64, nbytes: u64) -> bool {
    chunksize > 0 && nbytes > chunksize && !nbytes.is_multiple_of(chunksize)
}

/// The check of an assumed table (see the module's description).
#[derive(Default)]
pub struct Sizes {
    /// Entries `0..checked` are where their chunks' own sizes put them.
    checked: AtomicUsize,
    /// The table built from every chunk's own size, once one disagreed.
    rebuilt: OnceLock<Result<Vec<ChunkEntry>>>,
}

impl Sizes {
    pub fn new() -> Sizes {
        Sizes::default()
    }

    /// The rebuilt table, or why it could not be built, once a chunk's own
    /// size disagreed with the assumed table.
    pub fn rebuilt(&self) -> Option<&Result<Vec<ChunkEntry>>> {
        self.rebuilt.get()
    }

    /// A table whose first `need` entries are right: `table` (the assumed
    /// one) while each stored chunk among them has the size its entry
    /// gives, else the table rebuilt from every chunk's own size.
    /// `size_of(i)` is entry `i`'s stored chunk's size by its own header.
    pub fn checked<'a>(
        &'a self,
        table: &'a [ChunkEntry],
        need: usize,
        nbytes: u64,
        mut size_of: impl FnMut(usize) -> Result<u64>,
    ) -> Result<&'a [ChunkEntry]> {
        let mut i = self.checked.load(Ordering::Acquire);
        while i < need.min(table.len()) && self.rebuilt.get().is_none() {
            if matches!(table[i].loc, ChunkLoc::Stored { .. }) && size_of(i)? != table[i].ulen {
                self.rebuilt
                    .get_or_init(|| rebuild(table, nbytes, &mut size_of));
                break;
            }
            i += 1;
            self.checked.fetch_max(i, Ordering::Release);
        }
        match self.rebuilt.get() {
            Some(r) => r.as_deref().map_err(Clone::clone),
            None => Ok(table),
        }
    }
}

/// `table` with each stored chunk's size from `size_of` and the offsets
/// that follow (special chunks keep the size the table gives them).
pub fn rebuild(
    table: &[ChunkEntry],
    nbytes: u64,
    mut size_of: impl FnMut(usize) -> Result<u64>,
) -> Result<Vec<ChunkEntry>> {
    let mut out = Vec::with_capacity(table.len());
    let mut uoff = 0u64;
    for (i, e) in table.iter().enumerate() {
        let ulen = match e.loc {
            ChunkLoc::Stored { .. } => size_of(i)?,
            ChunkLoc::Special { .. } => e.ulen,
        };
        ensure!(
            ulen > 0,
            corrupt,
            "chunk {} holds no bytes in a frame of fixed chunk size",
            e.chunk
        );
        out.push(ChunkEntry {
            uoff,
            ulen,
            ..e.clone()
        });
        uoff = uoff
            .checked_add(ulen)
            .ok_or_else(|| Error::corrupt("chunk sizes overflow"))?;
    }
    ensure!(
        uoff == nbytes,
        corrupt,
        "chunks hold {uoff} bytes by their own headers but the frame declares {nbytes} (its fixed chunk size does not say where chunks start)"
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::chunk::Special;

    fn table(sizes: &[u64], special: &[usize]) -> Vec<ChunkEntry> {
        let mut at = 0;
        (0..sizes.len())
            .map(|i| {
                let e = ChunkEntry {
                    chunk: i as u64,
                    uoff: at,
                    ulen: sizes[i],
                    loc: if special.contains(&i) {
                        ChunkLoc::Special {
                            kind: Special::Zeros,
                            typesize: 1,
                            value: Box::new([]),
                        }
                    } else {
                        ChunkLoc::Stored {
                            src: 0,
                            offset: i as u64 * 100,
                            cbytes: 100,
                        }
                    },
                    checksum: None,
                };
                at += sizes[i];
                e
            })
            .collect()
    }

    /// Sizes are read in order and only as far as asked; a table that
    /// holds is used as it is.
    #[test]
    fn a_right_table_is_checked_once_as_far_as_needed() {
        let t = table(&[10, 10, 10, 4], &[]);
        let s = Sizes::new();
        let mut asked = Vec::new();
        let got = s.checked(&t, 2, 34, |i| {
            asked.push(i);
            Ok(t[i].ulen)
        });
        assert!(std::ptr::eq(got.unwrap(), &t[..]));
        let got = s.checked(&t, 4, 34, |i| {
            asked.push(i);
            Ok(t[i].ulen)
        });
        assert!(std::ptr::eq(got.unwrap(), &t[..]));
        assert_eq!(asked, [0, 1, 2, 3]);
        assert!(s.rebuilt().is_none());
    }

    /// A short chunk in the middle: the table is rebuilt from every chunk's
    /// size (a special chunk keeps the chunk size), whatever was asked for.
    #[test]
    fn the_first_disagreeing_size_rebuilds_the_table() {
        let real = [10u64, 3, 10, 10, 8];
        let t = table(&[10, 10, 10, 10, 1], &[2]);
        let s = Sizes::new();
        let got = s.checked(&t, 2, 41, |i| Ok(real[i])).unwrap().to_vec();
        assert_eq!(got, table(&real, &[2]));
        // From now on the rebuilt table, with nothing read.
        let again = s.checked(&t, 5, 41, |_| panic!("read again")).unwrap();
        assert_eq!(again, &got[..]);
    }

    /// Sizes that do not add up to the declared size, a chunk of no bytes,
    /// an unreadable header: clear errors, kept.
    #[test]
    fn sizes_that_do_not_add_up_are_refused() {
        let t = table(&[10, 10, 5], &[]);
        let s = Sizes::new();
        let e = s.checked(&t, 3, 25, |i| Ok([10, 4, 10][i])).unwrap_err();
        assert!(e.reason.contains("chunks hold 24 bytes"), "{e}");
        let e = s.checked(&t, 1, 25, |_| panic!("read again")).unwrap_err();
        assert!(e.reason.contains("chunks hold 24 bytes"), "{e}");
        let e = rebuild(&t, 25, |i| Ok([10, 0, 15][i])).unwrap_err();
        assert!(e.reason.contains("chunk 1 holds no bytes"), "{e}");
        let s = Sizes::new();
        let e = s
            .checked(&t, 3, 25, |_| Err(Error::truncated("cut")))
            .unwrap_err();
        assert_eq!(e.reason, "cut");
        assert!(s.rebuilt().is_none(), "a read error is not a verdict");
    }

    #[test]
    fn only_frames_with_a_short_last_chunk_are_checked() {
        assert!(!need_check(10, 30));
        assert!(!need_check(10, 10));
        assert!(!need_check(10, 7));
        assert!(!need_check(0, 7));
        assert!(need_check(10, 31));
    }
}
