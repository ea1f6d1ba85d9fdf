//! Decoding ahead: the [`Runner`] trait through which containers hand work
//! to threads of their caller's (decoding spans before a sequential reader
//! asks for them, blocks of a scattered read in parallel, preparing spare
//! block buffers, asking a source to read ahead), the table of blocks
//! queued or being decoded, and (`policy`) how far ahead to decode.
//!
//! The library starts no thread: with no runner ([`crate::Env::new`]),
//! every block is decoded by the read that needs it and nothing is handed
//! off. The bloscfs daemon's runner is the `bloscfs-pool` crate.
//!
//! A block or span handed to the runner is *queued*, then *running*, then
//! *done*. A reader that needs a queued one claims it (it never idles behind
//! a queue); a running one is waited for; a done one is in the block cache.
//! No cycle of waits can form: a span job waits at most for a block another
//! thread is decoding, a thread decoding a block waits at most for block 0
//! of its chunk (a delta filter's reference), whose decoder waits for
//! nothing, and a reader waits for a span holding nothing. A job that fails
//! only reports "nothing": the reader then decodes the bytes again and gets
//! the error with its file, chunk and block context (errors surface in
//! exactly one place, the read that needs the bytes). A job the runner
//! drops without running it releases its block the same way.

pub mod policy;

use crate::cache::{Block, BlockKey};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::Arc;

/// What a job handed to a [`Runner`] does, so that it can be run on a
/// thread that suits it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobKind {
    /// Decode a block or a span ahead of the reads that need it: CPU work
    /// that a reader may soon wait for. [`Runner::workers`] of these run at
    /// once.
    Decode,
    /// Prepare a spare block buffer (map its pages): housekeeping nobody
    /// waits for, best run only on an otherwise idle CPU.
    Spare,
    /// Tell a source which bytes will be read soon ([`crate::Source::will_need`]):
    /// cheap in CPU and wanted soon, so not at idle priority.
    Hint,
}

/// A job for a [`Runner`]: it returns nothing and never fails (a decode
/// job that fails leaves the read that needs the bytes to report why).
pub type Job = Box<dyn FnOnce() + Send>;

/// Runs the jobs containers hand off, on threads of its own: what decodes
/// ahead of sequential readers and in parallel for scattered reads. Give
/// one to [`crate::Env::with_runner`].
///
/// A runner may refuse any job (its queue is full, it runs no job of that
/// kind): the container then does without (decodes in the read, or skips
/// the chore). A job accepted may also be dropped unrun; nothing waits for
/// it forever. A runner must not run a job in the call that hands it over
/// while holding a lock the job could need (running it inline is allowed,
/// though it gains nothing).
///
/// ```
/// use blosc_decode::ahead::{Job, JobKind, Runner};
/// use std::sync::Arc;
///
/// /// A thread for every job (a real runner bounds its threads and queue).
/// struct ThreadPerJob;
///
/// impl Runner for ThreadPerJob {
///     fn workers(&self) -> usize {
///         2
///     }
///     fn run(&self, kind: JobKind, job: Job) -> bool {
///         kind == JobKind::Decode && std::thread::Builder::new().spawn(job).is_ok()
///     }
/// }
///
/// let env = blosc_decode::Env::with_runner(16 << 20, Arc::new(ThreadPerJob));
/// assert!(env.ahead.enabled());
/// ```
pub trait Runner: Send + Sync {
    /// How many [`JobKind::Decode`] jobs it runs at once: what the
    /// automatic decode-ahead takes for the CPUs it may use. 0: it runs
    /// none, and no job of any kind is handed to it.
    fn workers(&self) -> usize;
    /// Run `job` on a thread that suits `kind`, soon; false if it refuses
    /// (the job is dropped).
    fn run(&self, kind: JobKind, job: Job) -> bool;
}

enum State {
    Queued,
    Running,
    Done(Option<Block>),
}

/// One block handed to the runner, or being decoded by a reader.
pub struct Slot {
    state: Mutex<State>,
    cv: Condvar,
}

impl Slot {
    fn new(state: State) -> Arc<Slot> {
        Arc::new(Slot {
            state: Mutex::new(state),
            cv: Condvar::new(),
        })
    }
}

/// What a reader gets for a block in the table.
pub enum Claim {
    /// It was still queued: the reader decodes it now, then calls `Ahead::finish`.
    Mine,
    /// Decoded by someone else (`None`: that failed, decode it yourself).
    Done(Option<Block>),
}

/// Work that decodes one block or span and puts it in the cache.
pub type Work = Box<dyn FnOnce() -> Option<Block> + Send>;

type Table = Arc<Mutex<HashMap<BlockKey, Arc<Slot>>>>;

/// The decode-ahead state an [`crate::Env`] shares: its runner (if any),
/// the sequential readers active now, and the blocks queued or being
/// decoded.
pub struct Ahead {
    runner: Option<Arc<dyn Runner>>,
    /// The sequential readers active now (what decoding ahead is shared by).
    pub readers: policy::Readers,
    table: Table,
}

impl Ahead {
    /// Jobs handed to `runner` (`None`: nothing is handed off; every
    /// `submit` and `spawn` is refused).
    pub fn new(runner: Option<Arc<dyn Runner>>) -> Self {
        Ahead {
            runner,
            readers: policy::Readers::default(),
            table: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Is there a runner that decodes ahead?
    pub fn enabled(&self) -> bool {
        self.workers() > 0
    }

    /// Decode jobs the runner runs at once (0: no runner).
    pub fn workers(&self) -> usize {
        self.runner.as_ref().map_or(0, |r| r.workers())
    }

    /// Is `key` queued or being decoded?
    pub fn lookup(&self, key: &BlockKey) -> Option<Arc<Slot>> {
        self.table.lock().get(key).cloned()
    }

    /// Queue `work` (which decodes block `key` and puts it in the cache).
    /// Returns false when the key is already queued or the runner refuses.
    pub fn submit(&self, key: BlockKey, work: Work) -> bool {
        let Some(runner) = self.runner.as_ref().filter(|r| r.workers() > 0) else {
            return false;
        };
        let slot = Slot::new(State::Queued);
        {
            let mut t = self.table.lock();
            if t.contains_key(&key) {
                return false;
            }
            t.insert(key, slot.clone());
        }
        let job = Queued {
            table: self.table.clone(),
            key,
            slot,
            work: Some(work),
        };
        // Refused, the job is dropped, which releases its slot.
        runner.run(JobKind::Decode, Box::new(move || job.run()))
    }

    /// Hand `task` to the runner as a job of `kind` ([`JobKind::Spare`] or
    /// [`JobKind::Hint`]); false if there is no runner or it refuses.
    pub fn spawn(&self, kind: JobKind, task: Job) -> bool {
        match &self.runner {
            Some(r) if r.workers() > 0 => r.run(kind, task),
            _ => false,
        }
    }

    /// Claim a queued block or wait for a running one.
    pub fn claim(&self, slot: &Slot) -> Claim {
        let mut s = slot.state.lock();
        loop {
            match &*s {
                State::Queued => {
                    *s = State::Running;
                    return Claim::Mine;
                }
                State::Running => slot.cv.wait(&mut s),
                State::Done(v) => return Claim::Done(v.clone()),
            }
        }
    }

    /// Register `key` as being decoded by the caller, who must then call
    /// [`Started::finish`]: other readers of it wait for that block (see
    /// `claim`) instead of decoding it too. `None` if it is queued or being
    /// decoded already.
    pub fn start(&self, key: BlockKey) -> Option<Started<'_>> {
        let mut t = self.table.lock();
        if let Some(s) = t.get(&key) {
            if !matches!(*s.state.lock(), State::Done(_)) {
                return None;
            }
        }
        let slot = Slot::new(State::Running);
        t.insert(key, slot.clone());
        Some(Started {
            ahead: self,
            key,
            slot: Some(slot),
        })
    }

    /// The value of `key`, loaded once however many readers want it at
    /// once: a block still queued on the runner is claimed and loaded
    /// here, one being loaded is waited for, else `cached` gives what is
    /// kept of it, else it is loaded here, registered first (`start`) so
    /// that other readers wait for it. `kept` is the block of a loaded
    /// value the waiting readers get (`None`: none, they load it
    /// themselves); `found` turns the block they get into the value.
    pub fn load_once<T>(
        &self,
        key: BlockKey,
        cached: impl Fn() -> Option<T>,
        load: impl FnOnce() -> crate::Result<T>,
        kept: impl Fn(&crate::Result<T>) -> Option<Block>,
        found: impl Fn(Block) -> T,
    ) -> crate::Result<T> {
        loop {
            // The table first, then the cache: a job puts its value in the
            // cache before it leaves the table, so none finished is missed.
            if let Some(slot) = self.lookup(&key) {
                match self.claim(&slot) {
                    Claim::Mine => {
                        let r = load();
                        self.finish(key, &slot, kept(&r));
                        return r;
                    }
                    Claim::Done(Some(b)) => return Ok(found(b)),
                    Claim::Done(None) => {}
                }
            }
            if let Some(v) = cached() {
                return Ok(v);
            }
            // Someone else started it since: wait for theirs.
            let Some(started) = self.start(key) else {
                continue;
            };
            let r = load();
            started.finish(kept(&r));
            return r;
        }
    }

    /// Is the block of `slot` being decoded now (a `claim` would wait)?
    pub fn running(&self, slot: &Slot) -> bool {
        matches!(*slot.state.lock(), State::Running)
    }

    /// A reader finished a block it claimed: `v` is the block if it kept
    /// it, `None` if it decoded it straight where it needed it (or failed).
    pub fn finish(&self, key: BlockKey, slot: &Arc<Slot>, v: Option<Block>) {
        finish(&self.table, key, slot, v)
    }

    /// Blocks queued or running now.
    pub fn in_flight(&self) -> usize {
        self.table.lock().len()
    }
}

/// A block a reader registered as being decoded by it (`Ahead::start`).
/// Dropped without `finish` (an error or a panic), it releases the readers
/// waiting for it with "no block".
pub struct Started<'a> {
    ahead: &'a Ahead,
    key: BlockKey,
    slot: Option<Arc<Slot>>,
}

impl Started<'_> {
    /// The block is decoded (`Some`) or failed (`None`).
    pub fn finish(mut self, v: Option<Block>) {
        if let Some(slot) = self.slot.take() {
            finish(&self.ahead.table, self.key, &slot, v);
        }
    }
}

impl Drop for Started<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            finish(&self.ahead.table, self.key, &slot, None);
        }
    }
}

fn finish(table: &Table, key: BlockKey, slot: &Arc<Slot>, v: Option<Block>) {
    *slot.state.lock() = State::Done(v);
    slot.cv.notify_all();
    let mut t = table.lock();
    if t.get(&key).is_some_and(|s| Arc::ptr_eq(s, slot)) {
        t.remove(&key);
    }
}

/// A block queued on the runner: run, it decodes the block unless a reader
/// claimed it first; dropped unrun, it releases the readers of the block.
struct Queued {
    table: Table,
    key: BlockKey,
    slot: Arc<Slot>,
    work: Option<Work>,
}

impl Queued {
    fn run(mut self) {
        let Some(work) = self.work.take() else { return };
        {
            let mut s = self.slot.state.lock();
            if !matches!(*s, State::Queued) {
                return; // a reader claimed it
            }
            *s = State::Running;
        }
        // A panic in a decoder must not leave readers waiting forever.
        let v = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or(None);
        finish(&self.table, self.key, &self.slot, v);
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        if self.work.is_none() {
            return;
        }
        {
            let mut s = self.slot.state.lock();
            if !matches!(*s, State::Queued) {
                return; // a reader claimed it: it finishes it
            }
            *s = State::Running;
        }
        finish(&self.table, self.key, &self.slot, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(n: u8) -> Option<Block> {
        Some(Arc::new(vec![n; 4].into()))
    }

    /// A runner that keeps the jobs it is given until the test runs or
    /// drops them; it refuses any past `room`.
    struct Held {
        room: usize,
        jobs: Mutex<Vec<(JobKind, Job)>>,
    }

    impl Held {
        fn new(room: usize) -> Arc<Held> {
            Arc::new(Held {
                room,
                jobs: Mutex::new(Vec::new()),
            })
        }
        fn take(&self) -> Vec<(JobKind, Job)> {
            std::mem::take(&mut *self.jobs.lock())
        }
    }

    impl Runner for Held {
        fn workers(&self) -> usize {
            self.room.min(1)
        }
        fn run(&self, kind: JobKind, job: Job) -> bool {
            let mut jobs = self.jobs.lock();
            if jobs.len() >= self.room {
                return false;
            }
            jobs.push((kind, job));
            true
        }
    }

    fn with(runner: &Arc<Held>) -> Ahead {
        Ahead::new(Some(runner.clone() as Arc<dyn Runner>))
    }

    #[test]
    fn queued_blocks_are_claimed_or_decoded() {
        let runner = Held::new(8);
        let a = with(&runner);
        assert!(a.submit((1, 0, 0), Box::new(|| block(7))));
        assert!(a.submit((1, 0, 1), Box::new(|| block(9))));
        assert!(
            !a.submit((1, 0, 1), Box::new(|| block(9))),
            "already queued"
        );
        // A reader claims block 1 before the runner gets to it.
        let s1 = a.lookup(&(1, 0, 1)).unwrap();
        assert!(matches!(a.claim(&s1), Claim::Mine));
        let jobs = runner.take();
        assert!(jobs.iter().all(|(k, _)| *k == JobKind::Decode));
        for (_, job) in jobs {
            job();
        }
        // Its job did nothing: the reader still holds it.
        assert!(a.running(&s1));
        a.finish((1, 0, 1), &s1, None);
        assert!(a.lookup(&(1, 0, 1)).is_none());
        assert!(a.lookup(&(1, 0, 0)).is_none(), "decoded by its job");
        assert_eq!(a.in_flight(), 0);
    }

    /// A block a reader decodes itself is waited for by the others; one
    /// abandoned releases them.
    #[test]
    fn started_blocks_are_waited_for() {
        let a = Arc::new(Ahead::new(None));
        let s = a.start((4, 0, 0)).expect("nothing queued");
        assert!(a.start((4, 0, 0)).is_none(), "being decoded already");
        let slot = a.lookup(&(4, 0, 0)).unwrap();
        assert!(a.running(&slot));
        let a2 = a.clone();
        let waiter = std::thread::spawn(move || match a2.claim(&slot) {
            Claim::Done(Some(b)) => b[0],
            _ => panic!("a started block is not claimed"),
        });
        s.finish(block(5));
        assert_eq!(waiter.join().unwrap(), 5);
        assert!(a.lookup(&(4, 0, 0)).is_none());
        let s = a.start((4, 0, 1)).unwrap();
        let slot = a.lookup(&(4, 0, 1)).unwrap();
        drop(s);
        assert!(matches!(a.claim(&slot), Claim::Done(None)));
        assert_eq!(a.in_flight(), 0);
    }

    /// Failing, panicking, dropped or refused jobs leave no block waited
    /// for.
    #[test]
    fn failing_dropped_or_refused_jobs_release_waiters() {
        let runner = Held::new(3);
        let a = with(&runner);
        assert!(a.submit((2, 0, 0), Box::new(|| None)));
        assert!(a.submit((2, 0, 1), Box::new(|| panic!("decoder bug"))));
        assert!(a.submit((2, 0, 2), Box::new(|| block(1))));
        assert!(!a.submit((2, 0, 3), Box::new(|| block(1))), "refused");
        assert!(a.lookup(&(2, 0, 3)).is_none());
        let mut jobs = runner.take().into_iter();
        let slots: Vec<_> = (0..3).map(|i| a.lookup(&(2, 0, i)).unwrap()).collect();
        jobs.next().unwrap().1();
        jobs.next().unwrap().1();
        drop(jobs); // the third is never run
        for s in &slots {
            assert!(matches!(a.claim(s), Claim::Done(None)));
        }
        assert_eq!(a.in_flight(), 0);
    }

    /// With no runner, or one of no workers, nothing is handed off.
    #[test]
    fn without_a_runner_nothing_is_handed_off() {
        for a in [Ahead::new(None), with(&Held::new(0))] {
            assert!(!a.enabled());
            assert!(!a.submit((3, 0, 0), Box::new(|| block(1))));
            assert!(!a.spawn(JobKind::Spare, Box::new(|| {})));
            assert_eq!(a.in_flight(), 0);
        }
        let runner = Held::new(4);
        assert!(with(&runner).spawn(JobKind::Hint, Box::new(|| {})));
        assert_eq!(runner.take()[0].0, JobKind::Hint);
    }
}
