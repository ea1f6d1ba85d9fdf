//! Work a FUSE worker thread does after it has replied to a read.
//!
//! A cold 4 KiB read of a shuffled block needs the block's streams decoded,
//! but only its 4 KiB unshuffled: the rest of the block (unshuffling it
//! whole and caching it for the reads that follow) can wait until the
//! reader has its bytes. The FUSE adapter opens a window around each read
//! ([`begin`] .. [`finish`], which runs what was deferred once the reply is
//! sent); elsewhere (`bloscfs cat`, tests) nothing is deferred and callers
//! do all the work in line.

use std::cell::RefCell;

/// Deferred work: runs on the thread that deferred it.
pub type Job = Box<dyn FnOnce()>;

thread_local! {
    /// `Some` while a reply is being prepared on this thread.
    static JOBS: RefCell<Option<Vec<Job>>> = const { RefCell::new(None) };
}

/// Open the window: work may be deferred until [`finish`].
pub fn begin() {
    JOBS.with(|j| *j.borrow_mut() = Some(Vec::new()));
}

/// Can work be deferred on this thread now?
pub fn open() -> bool {
    JOBS.with(|j| j.borrow().is_some())
}

/// Defer `job` until [`finish`]; when no window is open, hand it back.
pub fn defer(job: Job) -> Result<(), Job> {
    JOBS.with(|j| match &mut *j.borrow_mut() {
        Some(v) => {
            v.push(job);
            Ok(())
        }
        None => Err(job),
    })
}

/// Close the window and run what was deferred, in order.
pub fn finish() {
    let jobs = JOBS.with(|j| j.borrow_mut().take());
    for job in jobs.into_iter().flatten() {
        job();
    }
}

/// Run `f` in a window (`defer` allowed), then what it deferred.
pub fn within<R>(f: impl FnOnce() -> R) -> R {
    begin();
    let r = f();
    finish();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn deferred_work_runs_at_finish_and_only_inside_a_window() {
        let hits = Rc::new(Cell::new(0));
        let h = hits.clone();
        let job: Job = Box::new(move || h.set(h.get() + 1));
        let job = defer(job).expect_err("no window open: handed back");
        assert!(!open());
        begin();
        assert!(open());
        assert!(defer(job).is_ok());
        assert_eq!(hits.get(), 0);
        finish();
        assert_eq!(hits.get(), 1);
        assert!(!open());
        finish(); // nothing left, no window: a no-op
        assert_eq!(hits.get(), 1);
    }
}
