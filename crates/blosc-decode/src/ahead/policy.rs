//! How far ahead of a sequential reader to decode, decided from the CPUs
//! the process may use and the sequential readers active now. The
//! decisions are plain functions of those numbers; the one clock reading
//! (whether a reader is still active) is passed in by the caller.
//!
//! The unit of decoding ahead is a *span*: [`SPAN`] presented bytes decoded
//! by one pool worker into one buffer, from which the reads falling in it
//! are answered without a copy (a FUSE reply is written straight from it).
//!
//! Why these numbers: the kernel keeps about two read requests in flight
//! for each sequential reader of a FUSE file (1 MiB of read-ahead in 1 MiB
//! requests), and the FUSE thread serving a request decodes it, so each
//! reader keeps [`READER_CORES`] cores busy by itself. Only the cores left
//! over are worth decoding ahead on; with none left (2 CPUs and one reader,
//! or as many readers as half the CPUs) decoding ahead would only take
//! cores from the readers' own decoding and add a copy, so it is off.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// How decoding ahead is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeAhead {
    /// Sized by [`spans_ahead`] from the CPUs and the active readers.
    Auto,
    /// This many bytes past every sequential reader, whatever the machine
    /// (0: off).
    Fixed(u64),
}

impl DecodeAhead {
    /// `auto`, or a size in bytes with an optional K/M/G/T suffix.
    pub fn parse(s: &str, size: impl Fn(&str) -> Option<u64>) -> Option<DecodeAhead> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Some(DecodeAhead::Auto);
        }
        size(s).map(DecodeAhead::Fixed)
    }
}

/// Bytes one pool worker decodes ahead at a time, and what a read is
/// answered from without a copy (reads are at most 1 MiB: a span holds
/// several, and few straddle two).
pub const SPAN: u64 = 4 << 20;

/// Cores one sequential reader keeps busy by itself (see the module).
pub const READER_CORES: usize = 2;

/// Most spans ahead of one reader.
pub const MAX_SPANS: usize = 32;

/// A reader is active while its last sequential read is this recent.
pub const ACTIVE: Duration = Duration::from_secs(1);

/// Spans (of `span` bytes) to keep decoding ahead of one sequential reader
/// when `readers` are active on `cpus` CPUs, decoded bytes held ahead of
/// all readers together staying within `budget`.
///
/// Automatic: the cores the readers leave idle, shared evenly between
/// them, one span decoding on each (rounded up, so that a core is not left
/// idle by rounding); none when no core is left.
pub fn spans_ahead(
    setting: DecodeAhead,
    span: u64,
    cpus: usize,
    budget: u64,
    readers: usize,
) -> usize {
    let (readers, span) = (readers.max(1), span.max(1));
    let want = match setting {
        DecodeAhead::Fixed(bytes) => bytes.div_ceil(span).min(MAX_SPANS as u64) as usize,
        DecodeAhead::Auto => {
            let spare = cpus.saturating_sub(READER_CORES.saturating_mul(readers));
            spare.div_ceil(readers).min(MAX_SPANS)
        }
    };
    let fair_share = budget / span / readers as u64;
    want.min(fair_share as usize)
}

/// The sequential readers active now, by container.
#[derive(Default)]
pub struct Readers {
    seen: Mutex<Vec<(u64, Instant)>>,
}

impl Readers {
    /// Container `id` was read sequentially at `now`: how many readers are
    /// active (read sequentially within [`ACTIVE`] of `now`), it included.
    /// Those no longer active are forgotten.
    pub fn note(&self, id: u64, now: Instant) -> usize {
        let mut seen = self.seen.lock();
        seen.retain(|&(other, at)| other != id && now.saturating_duration_since(at) < ACTIVE);
        seen.push((id, now));
        seen.len()
    }

    /// Container `id` stopped reading sequentially (it jumped, or closed).
    pub fn leave(&self, id: u64) {
        self.seen.lock().retain(|&(other, _)| other != id);
    }

    /// Readers active at `now`.
    pub fn active(&self, now: Instant) -> usize {
        let seen = self.seen.lock();
        seen.iter()
            .filter(|&&(_, at)| now.saturating_duration_since(at) < ACTIVE)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DecodeAhead::{Auto, Fixed};

    const BIG: u64 = 1 << 40;

    /// One reader keeps two cores busy itself: on one or two CPUs nothing
    /// is decoded ahead; above, one span per idle core.
    #[test]
    fn one_reader_gets_the_idle_cores() {
        let ahead = |cpus| spans_ahead(Auto, SPAN, cpus, BIG, 1);
        assert_eq!(ahead(1), 0);
        assert_eq!(ahead(2), 0);
        assert_eq!(ahead(3), 1);
        assert_eq!(ahead(4), 2);
        assert_eq!(ahead(16), 14);
        assert_eq!(ahead(64), 62.min(MAX_SPANS));
    }

    /// Readers share the idle cores evenly; once they keep every core busy
    /// themselves, none is decoded ahead.
    #[test]
    fn readers_share_the_idle_cores() {
        let ahead = |readers| spans_ahead(Auto, SPAN, 16, BIG, readers);
        assert_eq!(ahead(1), 14);
        assert_eq!(ahead(2), 6);
        assert_eq!(ahead(4), 2);
        assert_eq!(ahead(5), 2); // 6 idle cores over 5 readers
        assert_eq!(ahead(7), 1);
        assert_eq!(ahead(8), 0);
        assert_eq!(ahead(16), 0);
        // All readers together never ask for more spans than idle cores
        // plus one per reader (rounding up).
        for cpus in 1..=128 {
            for r in 1..=cpus {
                let total = spans_ahead(Auto, SPAN, cpus, BIG, r) * r;
                let spare = cpus.saturating_sub(READER_CORES * r);
                assert!(total <= spare + r, "cpus {cpus}, readers {r}: {total}");
                if spare >= r {
                    let most = spare.min(MAX_SPANS * r);
                    assert!(total >= most, "idle cores left: cpus {cpus}, readers {r}");
                }
            }
        }
    }

    /// Decoded bytes held ahead stay within the budget, shared by the
    /// readers, whatever the setting.
    #[test]
    fn the_budget_bounds_every_setting() {
        let budget = 32 << 20; // 8 spans in all
        assert_eq!(spans_ahead(Auto, SPAN, 64, budget, 1), 8);
        assert_eq!(spans_ahead(Auto, SPAN, 64, budget, 4), 2);
        assert_eq!(spans_ahead(Fixed(1 << 30), SPAN, 2, budget, 2), 4);
        assert_eq!(spans_ahead(Auto, SPAN, 64, SPAN - 1, 1), 0);
    }

    /// A fixed setting applies on any machine: bytes rounded up to spans;
    /// 0 is off.
    #[test]
    fn a_fixed_setting_ignores_the_machine() {
        assert_eq!(spans_ahead(Fixed(0), SPAN, 64, BIG, 1), 0);
        assert_eq!(spans_ahead(Fixed(1), SPAN, 1, BIG, 1), 1);
        assert_eq!(spans_ahead(Fixed(64 << 20), SPAN, 2, BIG, 3), 16);
        assert_eq!(spans_ahead(Fixed(u64::MAX), SPAN, 2, BIG, 1), MAX_SPANS);
    }

    #[test]
    fn settings_parse() {
        let size = |s: &str| s.parse::<u64>().ok();
        assert_eq!(DecodeAhead::parse("auto", size), Some(Auto));
        assert_eq!(DecodeAhead::parse("AUTO", size), Some(Auto));
        assert_eq!(DecodeAhead::parse("0", size), Some(Fixed(0)));
        assert_eq!(DecodeAhead::parse("far", size), None);
    }

    /// Readers count while they read sequentially within `ACTIVE`, once
    /// each however often they read; one that jumps or stops leaves.
    #[test]
    fn active_readers_are_counted_once_and_expire() {
        let r = Readers::default();
        let t0 = Instant::now();
        assert_eq!(r.note(1, t0), 1);
        assert_eq!(r.note(1, t0), 1);
        assert_eq!(r.note(2, t0), 2);
        assert_eq!(r.note(3, t0 + ACTIVE / 2), 3);
        // Reader 1 and 2 went quiet; 3 is still active.
        assert_eq!(r.active(t0 + ACTIVE + ACTIVE / 4), 1);
        assert_eq!(r.note(4, t0 + ACTIVE + ACTIVE / 4), 2);
        r.leave(3);
        assert_eq!(r.active(t0 + ACTIVE + ACTIVE / 4), 1);
        assert_eq!(r.seen.lock().len(), 1, "expired readers are forgotten");
    }
}
