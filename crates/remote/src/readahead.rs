//! Sequential read-ahead policy of one object (no I/O here: it says which
//! byte ranges to fetch, and the object fetches them).
//!
//! Reads that each start where an earlier one ended (within [`GAP`]
//! forward, or anywhere in the range already fetched ahead of it) form a
//! scan; an object follows up to [`STREAMS`] scans at once (several readers
//! of one file, as the FUSE threads interleave them). Once a scan has read
//! [`TRIGGER`] bytes in [`TRIGGER_READS`] reads, its window opens: parts of
//! [`FIRST_PART`] doubling to [`MAX_PART`], each issued when it ends at most
//! four parts ahead of the reader, while the object's scans together stay
//! within `max_window` (half the page cache) ahead of their readers. A read
//! that continues no scan starts a new one in place of the least recently
//! used: that scan is forgotten, and its parts in flight land in the span
//! cache (they are never aborted: another reader may be waiting for them).

use std::ops::Range;

/// First read-ahead part (as mountpoint-s3's first request).
pub const FIRST_PART: u64 = 1152 << 10;
/// Largest read-ahead part.
pub const MAX_PART: u64 = 8 << 20;
/// A read starting at most this far past a scan's end continues it (the
/// container's block reads are contiguous).
pub const GAP: u64 = 64 << 10;
/// Reads ending at most this far before a scan's furthest end (out of
/// order: parallel FUSE threads) continue it too.
pub const BACK: u64 = 1 << 20;
/// Bytes and reads of a scan before read-ahead starts: a container's open
/// (small reads) stays under the first, a random read (a chunk header, its
/// block starts, one block) under the second.
pub const TRIGGER: u64 = 256 << 10;
pub const TRIGGER_READS: u32 = 4;
/// Scans followed per object.
pub const STREAMS: usize = 4;

/// One scan.
#[derive(Clone, Debug)]
struct Scan {
    /// End of its furthest read.
    end: u64,
    reads: u32,
    bytes: u64,
    /// Everything below this is fetched or being fetched (0: no window).
    frontier: u64,
    /// Size of its next part.
    part: u64,
    /// When it was last read (a counter), for replacement.
    used: u64,
}

impl Scan {
    fn ahead(&self) -> u64 {
        self.frontier.saturating_sub(self.end)
    }
}

/// The read-ahead state of one object.
pub struct ReadAhead {
    scans: Vec<Scan>,
    max_window: u64,
    clock: u64,
}

impl ReadAhead {
    /// No scans yet; never more than `max_window` bytes ahead in total.
    pub fn new(max_window: u64) -> Self {
        ReadAhead {
            scans: Vec::new(),
            max_window: max_window.max(FIRST_PART),
            clock: 0,
        }
    }

    /// A read of `len` bytes at `offset` of an object of `size` bytes: the
    /// byte ranges to fetch ahead of it.
    pub fn on_read(&mut self, offset: u64, len: u64, size: u64) -> Vec<Range<u64>> {
        let end = offset + len;
        self.clock += 1;
        let found = self
            .scans
            .iter()
            .position(|s| end + BACK >= s.end && offset <= s.end.max(s.frontier) + GAP);
        let Some(i) = found else {
            let new = Scan {
                end,
                reads: 1,
                bytes: len,
                frontier: 0,
                part: FIRST_PART.min(self.max_window),
                used: self.clock,
            };
            if self.scans.len() < STREAMS {
                self.scans.push(new);
            } else if let Some(old) = self.scans.iter_mut().min_by_key(|s| s.used) {
                *old = new;
            }
            return Vec::new();
        };
        let others: u64 = (self.scans.iter().enumerate())
            .filter(|&(j, _)| j != i)
            .map(|(_, s)| s.ahead())
            .sum();
        let active = 1
            + (self.scans.iter().enumerate())
                .filter(|&(j, s)| j != i && s.frontier > 0)
                .count() as u64;
        // Its share of the window, and what the others leave of it.
        let budget = (self.max_window / active).min(self.max_window.saturating_sub(others));
        let s = &mut self.scans[i];
        s.used = self.clock;
        s.end = s.end.max(end);
        s.reads += 1;
        s.bytes += len;
        if s.bytes < TRIGGER || s.reads < TRIGGER_READS {
            return Vec::new();
        }
        let want = 4 * s.part;
        let target = (s.end + want.min(budget)).min(size);
        s.frontier = s.frontier.max(s.end);
        let mut parts = Vec::new();
        let mut push = |s: &mut Scan, end: u64| {
            parts.push(s.frontier..end);
            s.frontier = end;
            s.part = (s.part * 2).min(MAX_PART).min(self.max_window);
        };
        while s.frontier < size && s.frontier + s.part.min(size - s.frontier) <= target {
            let end = (s.frontier + s.part).min(size);
            push(s, end);
        }
        // Short of budget: a part cut to what is left, if a first part's
        // worth.
        // Held back by the budget (scans share it): a part once a part's
        // worth (at most half the budget) is free, not every sliver a read
        // frees (that would be a request per chunk read).
        let least = s.part.min(budget / 2).max(FIRST_PART);
        if budget < want && target >= s.frontier + least {
            push(s, target);
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn an_open_never_starts_read_ahead() {
        // A frame's open: header fields, metalayers, trailer, offsets.
        let mut a = ReadAhead::new(32 * MIB);
        let size = 100 * MIB;
        for (o, l) in [
            (0, 128),
            (0, 24),
            (0, 97),
            (size - 238, 32),
            (size - 238, 203),
        ] {
            assert!(a.on_read(o, l, size).is_empty());
        }
        for (o, l) in [(97, 32), (129, 64), (193, 30_000), (30_193, 32)] {
            assert!(a.on_read(o, l, size).is_empty());
        }
    }

    #[test]
    fn a_random_read_never_starts_read_ahead() {
        let mut a = ReadAhead::new(32 * MIB);
        // chunk head then one block, at places far apart
        for at in [
            500 * MIB,
            10 * MIB,
            300 * MIB,
            700 * MIB,
            20 * MIB,
            900 * MIB,
        ] {
            assert!(a.on_read(at, 32, 1 << 40).is_empty());
            assert!(a.on_read(at + 32, 64, 1 << 40).is_empty());
            assert!(a.on_read(at + 9000, 1 << 20, 1 << 40).is_empty());
        }
    }

    #[test]
    fn a_scan_opens_a_growing_window_of_parts() {
        let mut a = ReadAhead::new(32 * MIB);
        let size = 1 << 40;
        let mut off = 0;
        let mut got = Vec::new();
        for _ in 0..200 {
            got.extend(a.on_read(off, 256 << 10, size));
            off += 256 << 10;
        }
        assert_eq!(got[0].start, 4 * (256 << 10), "starts after the 4th read");
        let sizes: Vec<u64> = got.iter().map(|r| r.end - r.start).collect();
        assert_eq!(
            &sizes[..4],
            &[FIRST_PART, 2 * FIRST_PART, 4 * FIRST_PART, MAX_PART]
        );
        assert!(sizes[4..].iter().all(|&s| s == MAX_PART));
        // Contiguous, no overlaps, no holes.
        for w in got.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        // Never more than the window ahead of the reader.
        assert!(got.last().unwrap().end <= off + 32 * MIB);
    }

    /// Two scans sharing the window: once their windows are open, each
    /// asks for parts of at least a quarter of the window, not one part per
    /// chunk it reads.
    #[test]
    fn scans_held_back_by_the_budget_ask_for_whole_parts() {
        let mut a = ReadAhead::new(32 * MIB);
        let size = 1 << 40;
        let (mut x, mut y) = (0, 500 * MIB);
        let mut got = Vec::new();
        for i in 0..400 {
            let step = 1200 << 10;
            let px = a.on_read(x, step, size);
            let py = a.on_read(y, step, size);
            if i > 40 {
                got.extend(px.into_iter().chain(py));
            }
            x += step;
            y += step;
        }
        assert!(!got.is_empty());
        let small: Vec<u64> = got
            .iter()
            .map(|r| r.end - r.start)
            .filter(|&l| l < 8 * MIB)
            .collect();
        assert!(
            small.is_empty(),
            "{} parts under 8 MiB, the first {:?}",
            small.len(),
            small.first()
        );
    }

    #[test]
    fn the_window_respects_its_cap_and_the_object_end() {
        let mut a = ReadAhead::new(2 * MIB);
        let mut got = Vec::new();
        for i in 0..8 {
            got.extend(a.on_read(i * MIB, MIB, 5 * MIB + 7));
        }
        assert_eq!(got.last().unwrap().end, 5 * MIB + 7);
        assert!(got.iter().all(|r| r.end - r.start <= 2 * MIB));
    }

    #[test]
    fn the_trailer_read_at_open_does_not_end_the_scan() {
        // A frame's open reads its header, its trailer, then its chunk
        // offsets near the start; a scan from the start must still get its
        // read-ahead.
        let mut a = ReadAhead::new(32 * MIB);
        let size = 6 * MIB;
        a.on_read(0, 128, size);
        a.on_read(size - 240, 240, size);
        let mut got = Vec::new();
        for i in 0..40 {
            got.extend(a.on_read(100 + i * 30_000, 30_000, size));
        }
        assert_eq!(got.first().map(|r| r.start), Some(100 + 9 * 30_000));
        assert_eq!(got.last().map(|r| r.end), Some(size));
    }

    #[test]
    fn random_reads_between_do_not_break_a_scan() {
        let mut a = ReadAhead::new(32 * MIB);
        let size = 1 << 40;
        let mut got = Vec::new();
        for i in 0..64 {
            got.extend(a.on_read(i * MIB, MIB, size));
            // another reader, far away, random
            a.on_read((1 << 39) | ((i * 7919 * MIB) % (1 << 38)), 4096, size);
        }
        assert!(
            got.last().unwrap().end >= 64 * MIB,
            "the scan kept its window"
        );
        for w in got.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
    }

    #[test]
    fn two_scans_share_the_window() {
        let mut a = ReadAhead::new(16 * MIB);
        let size = 1 << 40;
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for i in 0..64 {
            x.extend(a.on_read(i * MIB, MIB, size));
            y.extend(a.on_read((1 << 30) + i * MIB, MIB, size));
        }
        let total: u64 = a.scans.iter().map(Scan::ahead).sum();
        assert!(total <= 16 * MIB, "{:?}", a.scans);
        // Neither starves.
        assert!(x.last().unwrap().end > 64 * MIB, "{x:?}");
        assert!(y.last().unwrap().end > (1 << 30) + 64 * MIB, "{y:?}");
        // Out of order reads stay in their scan.
        let mut b = ReadAhead::new(32 * MIB);
        let mut n = 0;
        for i in [0, 1, 2, 3, 5, 4, 7, 6, 8] {
            n += b.on_read(i * MIB, MIB, size).len();
        }
        assert_eq!(b.scans.len(), 1);
        assert!(n > 0);
    }
}
