//! How far ahead of a sequential reader to decode, decided from the CPUs
//! the process may use and the sequential readers active now. The
//! decisions are plain functions of those numbers; the one clock reading
//! (whether a reader is still active) is passed in by the caller.
//!
//! The unit of decoding ahead is a *span*: [`SPAN`] presented bytes decoded
//! by one worker of the runner into one buffer, from which the reads falling in it
//! are answered without a copy (a FUSE reply is written straight from it).
//!
//! Why these numbers: the kernel keeps about two read requests in flight
//! for each sequential reader of a FUSE file (1 MiB of read-ahead in 1 MiB
//! requests), and the FUSE thread serving a request decodes it, so each
//! reader keeps [`READER_CORES`] cores busy by itself, each decoding and
//! then copying. Only the cores left over are worth decoding ahead on. Once
//! a reader is decoded ahead, its FUSE threads only copy, and it goes as
//! fast as its share of the idle cores decodes: with `s` cores decoding at
//! `d` each, `s d`, against `2 / (1/d + 1/c)` for its own two threads
//! decoding and copying (`c`: one thread's copy rate, several times `d`).
//! So a share of one core is a loss (half the rate for a slow codec), two
//! a gain: decoding ahead is on for a reader only when it gets at least
//! [`MIN_SPANS`] idle cores. On 2 or 3 CPUs it is off; on 16, up to 4
//! readers get it.

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

/// Bytes one worker of the runner decodes ahead at a time, and what a read is
/// answered from without a copy (reads are at most 1 MiB: a span holds
/// several, and few straddle two).
pub const SPAN: u64 = 4 << 20;

/// Cores one sequential reader keeps busy by itself (see the module).
pub const READER_CORES: usize = 2;

/// Most spans ahead of one reader.
pub const MAX_SPANS: usize = 32;

/// Fewest idle cores worth decoding ahead of one reader on (see the module).
pub const MIN_SPANS: usize = 2;

/// A reader is active while its last sequential read is this recent.
pub const ACTIVE: Duration = Duration::from_secs(1);

/// Spans (of `span` bytes) to keep decoding ahead of one sequential reader
/// when `readers` are active on `cpus` CPUs, decoded bytes held ahead of
/// all readers together staying within `budget`.
///
/// Automatic: the cores the readers leave idle, shared evenly between
/// them, one span decoding on each; none when a reader's share is less
/// than [`MIN_SPANS`] cores (see the module).
pub fn spans_ahead(
    setting: DecodeAhead,
    span: u64,
    cpus: usize,
    budget: u64,
    readers: usize,
) -> usize {
    let (readers, span) = (readers.max(1), span.max(1));
    let fair_share = (budget / span / readers as u64).min(MAX_SPANS as u64) as usize;
    match setting {
        DecodeAhead::Fixed(bytes) => bytes.div_ceil(span).min(fair_share as u64) as usize,
        DecodeAhead::Auto => {
            let spare = cpus.saturating_sub(READER_CORES.saturating_mul(readers));
            match (spare / readers).min(fair_share) {
                share if share < MIN_SPANS => 0,
                share => share,
            }
        }
    }
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

    /// One reader keeps two cores busy itself: on one to three CPUs
    /// nothing is decoded ahead (a share of one idle core would slow it
    /// down); above, one span per idle core.
    #[test]
    fn one_reader_gets_the_idle_cores() {
        let ahead = |cpus| spans_ahead(Auto, SPAN, cpus, BIG, 1);
        assert_eq!(ahead(1), 0);
        assert_eq!(ahead(2), 0);
        assert_eq!(ahead(3), 0);
        assert_eq!(ahead(4), 2);
        assert_eq!(ahead(16), 14);
        assert_eq!(ahead(64), 62.min(MAX_SPANS));
    }

    /// Readers share the idle cores evenly; a reader whose share would be
    /// less than two cores is not decoded ahead (it decodes faster itself).
    #[test]
    fn readers_share_the_idle_cores() {
        let ahead = |readers| spans_ahead(Auto, SPAN, 16, BIG, readers);
        assert_eq!(ahead(1), 14);
        assert_eq!(ahead(2), 6);
        assert_eq!(ahead(3), 3); // 10 idle cores over 3 readers
        assert_eq!(ahead(4), 2);
        assert_eq!(ahead(5), 0); // 6 idle cores over 5 readers
        assert_eq!(ahead(8), 0);
        assert_eq!(ahead(16), 0);
        for cpus in 1..=128 {
            for r in 1..=cpus {
                let each = spans_ahead(Auto, SPAN, cpus, BIG, r);
                let spare = cpus.saturating_sub(READER_CORES * r);
                // Never more spans decoding than idle cores...
                assert!(each * r <= spare, "cpus {cpus}, readers {r}: {each}");
                // ... a share of at least two, or none...
                assert!(each == 0 || each >= MIN_SPANS);
                // ... and no more than a core per reader left idle by
                // sharing, unless the share is too small or at its cap.
                if spare / r >= MIN_SPANS && each < MAX_SPANS {
                    assert!(each * r + r > spare, "idle cores left: {cpus}, {r}");
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
        assert_eq!(spans_ahead(Auto, SPAN, 64, budget, 5), 0, "a share of 1");
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
