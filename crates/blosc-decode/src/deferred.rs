//! [`Deferred`]: work a read leaves until its reply has gone.
//!
//! A cold 4 KiB read of a shuffled block needs the block's streams decoded,
//! but only its 4 KiB unshuffled: the rest of the block (unshuffling it
//! whole and caching it for the reads that follow) can wait until the
//! reader has its bytes. A caller that can answer first hands
//! [`Container::read_at_deferring`](crate::Container::read_at_deferring) a
//! [`Deferred::new`], replies, then calls [`Deferred::run`] (the FUSE
//! adapter does so); [`Container::read_at`](crate::Container::read_at)
//! passes [`Deferred::none`] and does all the work in line.
//!
//! What waits is bounded: each job is deferred under a key (a block) and
//! with the bytes it holds; a key is pending at most once per `Deferred`,
//! and one holds at most [`PENDING_MAX`] bytes of work (callers ask
//! [`Deferred::room`] first and do the work in line when there is none).

use crate::cache::BlockKey;

/// Deferred work.
pub type Job = Box<dyn FnOnce() + Send>;

/// The most bytes the jobs of one [`Deferred`] may hold at once.
pub const PENDING_MAX: usize = 4 << 20;

struct Pending {
    key: BlockKey,
    job: Job,
}

/// Work deferred by one request, run by [`Deferred::run`] (or when dropped)
/// in the order it was deferred.
pub struct Deferred {
    jobs: Vec<Pending>,
    /// The most bytes it may hold (0: nothing is deferred).
    limit: usize,
    /// Bytes the pending jobs hold now, and the most they held.
    bytes: usize,
    peak: usize,
}

impl Deferred {
    /// Work may be deferred, up to [`PENDING_MAX`] bytes of it.
    pub fn new() -> Self {
        Deferred::with_limit(PENDING_MAX)
    }

    /// Nothing is deferred: whoever would defer does the work in line.
    pub fn none() -> Self {
        Deferred::with_limit(0)
    }

    fn with_limit(limit: usize) -> Self {
        Deferred {
            jobs: Vec::new(),
            limit,
            bytes: 0,
            peak: 0,
        }
    }

    /// Can a job holding `bytes` more be deferred (work may be deferred at
    /// all, and the pending jobs stay within the limit)?
    pub fn room(&self, bytes: usize) -> bool {
        self.limit > 0 && self.bytes.saturating_add(bytes) <= self.limit
    }

    /// Is work for `key` pending?
    pub fn pending(&self, key: &BlockKey) -> bool {
        self.jobs.iter().any(|p| p.key == *key)
    }

    /// Defer `job` (work for `key`, holding `bytes`) until [`Deferred::run`];
    /// handed back when `key` is pending already or there is no
    /// [`Deferred::room`] for it.
    pub fn defer(&mut self, key: BlockKey, bytes: usize, job: Job) -> Result<(), Job> {
        if !self.room(bytes) || self.pending(&key) {
            return Err(job);
        }
        self.jobs.push(Pending { key, job });
        self.bytes += bytes;
        self.peak = self.peak.max(self.bytes);
        Ok(())
    }

    /// Run what was deferred, in order; more may be deferred after.
    pub fn run(&mut self) {
        for p in self.jobs.drain(..) {
            (p.job)();
        }
        self.bytes = 0;
    }

    /// The most bytes the pending jobs held at once (for tests and
    /// benchmarks).
    pub fn peak(&self) -> usize {
        self.peak
    }
}

impl Default for Deferred {
    fn default() -> Self {
        Deferred::new()
    }
}

impl Drop for Deferred {
    /// Work not run yet runs now (not while unwinding from a panic).
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.run();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn deferred_work_runs_when_run_and_only_where_allowed() {
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        let job: Job = Box::new(move || _ = h.fetch_add(1, Ordering::Relaxed));
        let job = Deferred::none()
            .defer((1, 0, 0), 10, job)
            .expect_err("nothing may be deferred: handed back");
        let mut later = Deferred::new();
        assert!(later.defer((1, 0, 0), 10, job).is_ok());
        assert!(later.pending(&(1, 0, 0)) && !later.pending(&(1, 0, 1)));
        assert_eq!(hits.load(Ordering::Relaxed), 0);
        later.run();
        assert_eq!(hits.load(Ordering::Relaxed), 1);
        assert!(!later.pending(&(1, 0, 0)));
        later.run(); // nothing left: a no-op
        assert_eq!(hits.load(Ordering::Relaxed), 1);
        // Work never run is run when its `Deferred` goes.
        let h = hits.clone();
        let mut later = Deferred::new();
        assert!(later
            .defer(
                (1, 0, 0),
                10,
                Box::new(move || _ = h.fetch_add(1, Ordering::Relaxed))
            )
            .is_ok());
        drop(later);
        assert_eq!(hits.load(Ordering::Relaxed), 2);
    }

    /// One job per key, and at most `PENDING_MAX` bytes held.
    #[test]
    fn deferred_work_is_bounded() {
        let mut later = Deferred::new();
        let job = || -> Job { Box::new(|| {}) };
        assert!(later.defer((1, 0, 0), 1 << 20, job()).is_ok());
        assert!(
            later.defer((1, 0, 0), 1, job()).is_err(),
            "key pending already"
        );
        assert!(later.defer((1, 0, 1), 3 << 20, job()).is_ok());
        assert!(!later.room(1));
        assert!(
            later.defer((1, 0, 2), 1, job()).is_err(),
            "over PENDING_MAX"
        );
        later.run();
        assert_eq!(later.peak(), PENDING_MAX);
        assert!(later.room(PENDING_MAX));
        assert!(!Deferred::none().room(0));
    }
}
