//! Work a FUSE worker thread does after it has replied to a read.
//!
//! A cold 4 KiB read of a shuffled block needs the block's streams decoded,
//! but only its 4 KiB unshuffled: the rest of the block (unshuffling it
//! whole and caching it for the reads that follow) can wait until the
//! reader has its bytes. The FUSE adapter opens a window around each read
//! ([`begin`] .. [`finish`], which runs what was deferred once the reply is
//! sent); elsewhere (`bloscfs cat`, tests) nothing is deferred and callers
//! do all the work in line.
//!
//! What waits is bounded: each job is deferred under a key (a block) and
//! with the bytes it holds; a key is pending at most once per window, and a
//! thread holds at most [`PENDING_MAX`] bytes of deferred work (callers ask
//! [`room`] first and do the work in line when there is none).

use crate::cache::BlockKey;
use std::cell::{Cell, RefCell};

/// Deferred work: runs on the thread that deferred it.
pub type Job = Box<dyn FnOnce()>;

/// The most bytes a thread's deferred jobs may hold at once.
pub const PENDING_MAX: usize = 4 << 20;

struct Pending {
    key: BlockKey,
    job: Job,
}

thread_local! {
    /// `Some` while a reply is being prepared on this thread.
    static JOBS: RefCell<Option<Vec<Pending>>> = const { RefCell::new(None) };
    /// Bytes the deferred jobs hold now, and the most they held since
    /// [`take_peak`].
    static BYTES: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

/// Open the window: work may be deferred until [`finish`].
pub fn begin() {
    JOBS.with(|j| *j.borrow_mut() = Some(Vec::new()));
}

/// Can work be deferred on this thread now?
pub fn open() -> bool {
    JOBS.with(|j| j.borrow().is_some())
}

/// Can a job holding `bytes` more be deferred now (a window is open and the
/// thread's deferred jobs stay within [`PENDING_MAX`])?
pub fn room(bytes: usize) -> bool {
    open() && BYTES.with(|b| b.get()).saturating_add(bytes) <= PENDING_MAX
}

/// Is work for `key` waiting in this thread's window?
pub fn pending(key: &BlockKey) -> bool {
    JOBS.with(|j| {
        j.borrow()
            .as_ref()
            .is_some_and(|v| v.iter().any(|p| p.key == *key))
    })
}

/// Defer `job` (work for `key`, holding `bytes`) until [`finish`]; handed
/// back when no window is open, `key` is pending already, or there is no
/// [`room`] for it.
pub fn defer(key: BlockKey, bytes: usize, job: Job) -> Result<(), Job> {
    if !room(bytes) || pending(&key) {
        return Err(job);
    }
    JOBS.with(|j| match &mut *j.borrow_mut() {
        Some(v) => {
            v.push(Pending { key, job });
            let now = BYTES.with(|b| {
                b.set(b.get() + bytes);
                b.get()
            });
            PEAK.with(|p| p.set(p.get().max(now)));
            Ok(())
        }
        None => Err(job),
    })
}

/// Close the window and run what was deferred, in order.
pub fn finish() {
    let jobs = JOBS.with(|j| j.borrow_mut().take());
    for p in jobs.into_iter().flatten() {
        (p.job)();
    }
    BYTES.with(|b| b.set(0));
}

/// Run `f` in a window (`defer` allowed), then what it deferred.
pub fn within<R>(f: impl FnOnce() -> R) -> R {
    begin();
    let r = f();
    finish();
    r
}

/// The most bytes this thread's deferred jobs held at once since the last
/// call (for tests and benchmarks).
pub fn take_peak() -> usize {
    PEAK.with(|p| p.replace(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn deferred_work_runs_at_finish_and_only_inside_a_window() {
        let hits = Rc::new(Cell::new(0));
        let h = hits.clone();
        let job: Job = Box::new(move || h.set(h.get() + 1));
        let job = defer((1, 0, 0), 10, job).expect_err("no window open: handed back");
        assert!(!open());
        begin();
        assert!(open());
        assert!(defer((1, 0, 0), 10, job).is_ok());
        assert!(pending(&(1, 0, 0)) && !pending(&(1, 0, 1)));
        assert_eq!(hits.get(), 0);
        finish();
        assert_eq!(hits.get(), 1);
        assert!(!open() && !pending(&(1, 0, 0)));
        finish(); // nothing left, no window: a no-op
        assert_eq!(hits.get(), 1);
    }

    /// One job per key, and at most `PENDING_MAX` bytes held.
    #[test]
    fn deferred_work_is_bounded() {
        take_peak();
        begin();
        let job = || -> Job { Box::new(|| {}) };
        assert!(defer((1, 0, 0), 1 << 20, job()).is_ok());
        assert!(defer((1, 0, 0), 1, job()).is_err(), "key pending already");
        assert!(defer((1, 0, 1), 3 << 20, job()).is_ok());
        assert!(!room(1));
        assert!(defer((1, 0, 2), 1, job()).is_err(), "over PENDING_MAX");
        finish();
        assert_eq!(take_peak(), PENDING_MAX);
        assert_eq!(take_peak(), 0);
        begin();
        assert!(room(PENDING_MAX));
        finish();
    }
}
