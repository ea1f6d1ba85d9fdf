//! Sequential read-ahead policy of one object (no I/O here: it says which
//! byte ranges to fetch, and the object fetches them).
//!
//! Reads that each start where the previous ones ended (within [`GAP`]
//! forward, or anywhere in the range already fetched ahead) form a scan;
//! once a scan has read [`TRIGGER`] bytes or [`TRIGGER_READS`] reads, the
//! window opens: parts of [`FIRST_PART`] doubling to [`MAX_PART`], issued
//! while the fetched-ahead frontier is less than four parts (at most
//! `max_window`, half the span cache) ahead of the reader and fewer than
//! [`MAX_INFLIGHT`] parts are in flight. A read anywhere else is a jump: the
//! parts in flight are aborted and the window closes.

use std::ops::Range;
use tokio::task::AbortHandle;

/// First read-ahead part (as mountpoint-s3's first request).
pub const FIRST_PART: u64 = 1152 << 10;
/// Largest read-ahead part.
pub const MAX_PART: u64 = 8 << 20;
/// Most parts in flight per object.
pub const MAX_INFLIGHT: usize = 16;
/// A read starting at most this far past the previous one's end continues
/// a scan (the container's block reads are contiguous).
pub const GAP: u64 = 64 << 10;
/// Reads ending at most this far before the scan's furthest end (out of
/// order: parallel FUSE threads) continue it too.
pub const BACK: u64 = 1 << 20;
/// Bytes or reads of a scan before read-ahead starts: a random read (a
/// chunk head, then one block) stays under both.
pub const TRIGGER: u64 = 1 << 20;
pub const TRIGGER_READS: u32 = 4;

/// What the object should do after a read.
pub enum Step {
    Nothing,
    /// A jump: abort these parts.
    Jump(Vec<AbortHandle>),
    /// Fetch these byte ranges (and hand their handles to `started`).
    Fetch(Vec<Range<u64>>),
}

/// The read-ahead state of one object.
pub struct Ahead {
    /// End of the furthest read of the current scan.
    end: u64,
    /// Reads and bytes of the current scan.
    reads: u32,
    bytes: u64,
    /// Everything below this is fetched or being fetched (0: window closed).
    frontier: u64,
    /// Size of the next part.
    part: u64,
    max_window: u64,
    tasks: Vec<AbortHandle>,
}

impl Ahead {
    /// A closed window that never runs more than `max_window` bytes ahead.
    pub fn new(max_window: u64) -> Self {
        Ahead {
            end: 0,
            reads: 0,
            bytes: 0,
            frontier: 0,
            part: FIRST_PART,
            max_window: max_window.max(FIRST_PART),
            tasks: Vec::new(),
        }
    }

    /// A read of `len` bytes at `offset` of an object of `size` bytes.
    pub fn on_read(&mut self, offset: u64, len: u64, size: u64) -> Step {
        let end = offset + len;
        let reach = self.end.max(self.frontier) + GAP;
        let scan = self.reads > 0 && end + BACK >= self.end && offset <= reach;
        if !scan {
            let old = std::mem::take(&mut self.tasks);
            let had = self.frontier > 0;
            *self = Ahead {
                end,
                reads: 1,
                bytes: len,
                ..Ahead::new(self.max_window)
            };
            return if had { Step::Jump(old) } else { Step::Nothing };
        }
        self.end = self.end.max(end);
        self.reads += 1;
        self.bytes += len;
        if self.bytes < TRIGGER && self.reads < TRIGGER_READS {
            return Step::Nothing;
        }
        self.tasks.retain(|t| !t.is_finished());
        let ahead = (4 * self.part).min(self.max_window);
        let target = (self.end + ahead).min(size);
        let mut parts = Vec::new();
        self.frontier = self.frontier.max(self.end);
        while self.frontier < size
            && self.frontier + self.part.min(size - self.frontier) <= target
            && self.tasks.len() + parts.len() < MAX_INFLIGHT
        {
            let p = self.frontier..(self.frontier + self.part).min(size);
            self.frontier = p.end;
            parts.push(p);
            self.part = (self.part * 2).min(MAX_PART).min(self.max_window);
        }
        if parts.is_empty() {
            Step::Nothing
        } else {
            Step::Fetch(parts)
        }
    }

    /// The parts just started (to abort on a jump).
    pub fn started(&mut self, handles: Vec<AbortHandle>) {
        self.tasks.extend(handles);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn parts(s: Step) -> Vec<Range<u64>> {
        match s {
            Step::Fetch(p) => p,
            _ => vec![],
        }
    }

    #[test]
    fn a_random_read_never_starts_read_ahead() {
        let mut a = Ahead::new(32 * MIB);
        // chunk head then one block, at three places far apart
        for at in [500 * MIB, 10 * MIB, 300 * MIB] {
            assert!(matches!(a.on_read(at, 8 << 10, 1 << 40), Step::Nothing));
            assert!(matches!(
                a.on_read(at + 9000, 256 << 10, 1 << 40),
                Step::Nothing
            ));
        }
    }

    #[test]
    fn a_scan_opens_a_growing_window_of_parts() {
        let mut a = Ahead::new(32 * MIB);
        let size = 1 << 40;
        let mut off = 0;
        let mut got = Vec::new();
        for _ in 0..200 {
            got.extend(parts(a.on_read(off, 256 << 10, size)));
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

    #[test]
    fn the_window_respects_its_cap_and_the_object_end() {
        let mut a = Ahead::new(2 * MIB);
        let mut got = Vec::new();
        for i in 0..8 {
            got.extend(parts(a.on_read(i * MIB, MIB, 5 * MIB + 7)));
        }
        assert_eq!(got.last().unwrap().end, 5 * MIB + 7);
        assert!(got.iter().all(|r| r.end - r.start <= 2 * MIB));
    }

    #[test]
    fn the_trailer_read_at_open_does_not_end_the_scan() {
        // A frame's open reads its header, its trailer, then its chunk
        // offsets near the start; a scan from the start must still get its
        // read-ahead.
        let mut a = Ahead::new(32 * MIB);
        let size = 6 * MIB;
        a.on_read(0, 128, size);
        a.on_read(size - 240, 240, size);
        let mut got = Vec::new();
        for i in 0..40 {
            got.extend(parts(a.on_read(100 + i * 30_000, 30_000, size)));
        }
        assert_eq!(got.first().map(|r| r.start), Some(100 + 4 * 30_000));
        assert_eq!(got.last().map(|r| r.end), Some(size));
    }

    #[test]
    fn a_jump_closes_the_window_and_reports_it() {
        let mut a = Ahead::new(32 * MIB);
        for i in 0..8 {
            a.on_read(i * MIB, MIB, 1 << 40);
        }
        assert!(a.frontier > 8 * MIB);
        assert!(matches!(a.on_read(900 * MIB, 4096, 1 << 40), Step::Jump(_)));
        assert_eq!(a.frontier, 0);
        // Reads slightly out of order stay in the scan.
        let mut b = Ahead::new(32 * MIB);
        for i in [0, 1, 2, 3, 5, 4, 7, 6] {
            assert!(!matches!(b.on_read(i * MIB, MIB, 1 << 40), Step::Jump(_)));
        }
    }
}
