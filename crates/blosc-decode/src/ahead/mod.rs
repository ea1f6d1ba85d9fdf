//! The pool: worker threads that decode spans before a sequential reader
//! asks for them (as far as `policy` decides) and blocks of a scattered
//! read in parallel, and one thread at idle priority
//! (`SCHED_IDLE`) that prepares spare block buffers off the read path, one
//! at normal priority that asks the kernel to read ahead; and the table of
//! blocks queued or being decoded.
//!
//! A block or span handed to the pool is *queued*, then *running*, then
//! *done*. A reader that needs a queued one claims it (it never idles behind
//! a queue); a running one is waited for; a done one is in the block cache.
//! No cycle of waits can form: a span job waits at most for a block another
//! thread is decoding, a thread decoding a block waits at most for block 0
//! of its chunk (a delta filter's reference), whose decoder waits for
//! nothing, and a reader waits for a span holding nothing. A job that fails
//! only reports "nothing": the reader then decodes the bytes again and gets
//! the error with its file, chunk and block context (errors surface in
//! exactly one place, the read that needs the bytes).

pub mod policy;

use crate::cache::{Block, BlockKey};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};

/// A thread running chores one after the other (`idle`: at `SCHED_IDLE`).
fn chore_thread(name: &str, idle: bool) -> Mutex<SyncSender<Chore>> {
    let (tx, rx) = sync_channel::<Chore>(QUEUE);
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if idle {
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: pid 0 is this thread; `param` is valid.
                unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
            }
            while let Ok(chore) = rx.recv() {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(chore));
            }
        });
    if let Err(e) = spawned {
        log::warn!("cannot start the {name} thread: {e}");
    }
    Mutex::new(tx)
}

/// Jobs waiting at most; a full queue drops further decode-ahead.
const QUEUE: usize = 256;

enum State {
    Queued,
    Running,
    Done(Option<Block>),
}

/// One block handed to the pool.
pub struct Slot {
    state: Mutex<State>,
    cv: Condvar,
}

/// What a reader gets for a block in the table.
pub enum Claim {
    /// It was still queued: the reader decodes it now, then calls `Ahead::finish`.
    Mine,
    /// Decoded by someone else (`None`: that failed, decode it yourself).
    Done(Option<Block>),
}

type Work = Box<dyn FnOnce() -> Option<Block> + Send>;

struct Job {
    key: BlockKey,
    slot: Arc<Slot>,
    work: Work,
}

/// Housekeeping nobody waits for (mapping spare buffers).
type Chore = Box<dyn FnOnce() + Send>;

type Table = Arc<Mutex<HashMap<BlockKey, Arc<Slot>>>>;

pub struct Ahead {
    workers: usize,
    /// The sequential readers active now (what decoding ahead is shared by).
    pub readers: policy::Readers,
    queue: OnceLock<Mutex<SyncSender<Job>>>,
    chores: OnceLock<Mutex<SyncSender<Chore>>>,
    io_chores: OnceLock<Mutex<SyncSender<Chore>>>,
    table: Table,
}

impl Ahead {
    /// A pool of `workers` threads, started on first use (0: no pool; every
    /// `submit` is refused).
    pub fn new(workers: usize) -> Self {
        Ahead {
            workers,
            readers: policy::Readers::default(),
            queue: OnceLock::new(),
            chores: OnceLock::new(),
            io_chores: OnceLock::new(),
            table: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    pub fn enabled(&self) -> bool {
        self.workers > 0
    }

    /// Its threads: one per CPU the process may use, unless set otherwise.
    pub fn workers(&self) -> usize {
        self.workers
    }

    fn sender(&self) -> &Mutex<SyncSender<Job>> {
        self.queue.get_or_init(|| {
            let (tx, rx) = sync_channel::<Job>(QUEUE);
            let rx = Arc::new(std::sync::Mutex::new(rx));
            for n in 0..self.workers {
                let rx = rx.clone();
                let table = self.table.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("bloscfs-ahead-{n}"))
                    .spawn(move || worker(&rx, &table));
                if let Err(e) = spawned {
                    log::warn!("cannot start a decode-ahead thread: {e}");
                }
            }
            Mutex::new(tx)
        })
    }

    /// The chore thread: `SCHED_IDLE`, so it runs only on an otherwise idle
    /// CPU and never delays a reader's decoding on the same CPU. (A thread
    /// cannot always come back from `SCHED_IDLE` unprivileged, hence a
    /// thread of its own rather than switching a worker back and forth.)
    fn chores(&self) -> &Mutex<SyncSender<Chore>> {
        self.chores
            .get_or_init(|| chore_thread("bloscfs-spares", true))
    }

    /// The I/O chore thread, at normal priority: what it does (asking the
    /// kernel to read ahead) is cheap in CPU and wanted soon, so it must not
    /// wait for an idle CPU.
    fn io_chores(&self) -> &Mutex<SyncSender<Chore>> {
        self.io_chores
            .get_or_init(|| chore_thread("bloscfs-hints", false))
    }

    /// Is `key` queued or being decoded?
    pub fn lookup(&self, key: &BlockKey) -> Option<Arc<Slot>> {
        self.table.lock().get(key).cloned()
    }

    /// Queue `work` (which decodes block `key` and puts it in the cache).
    /// Returns false when the key is already queued or the queue is full.
    pub fn submit(&self, key: BlockKey, work: Work) -> bool {
        if !self.enabled() {
            return false;
        }
        let slot = Arc::new(Slot {
            state: Mutex::new(State::Queued),
            cv: Condvar::new(),
        });
        {
            let mut t = self.table.lock();
            if t.contains_key(&key) {
                return false;
            }
            t.insert(key, slot.clone());
        }
        let job = Job {
            key,
            slot: slot.clone(),
            work,
        };
        match self.sender().lock().try_send(job) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                finish(&self.table, key, &slot, None);
                false
            }
        }
    }

    /// Run `task` on the chore thread; false if the pool is off or the
    /// chore queue is full (the task is dropped).
    pub fn spawn(&self, task: Chore) -> bool {
        self.enabled() && self.chores().lock().try_send(task).is_ok()
    }

    /// Run `task` on the I/O chore thread (normal priority); false if the
    /// pool is off or its queue is full (the task is dropped).
    pub fn spawn_io(&self, task: Chore) -> bool {
        self.enabled() && self.io_chores().lock().try_send(task).is_ok()
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
        let slot = Arc::new(Slot {
            state: Mutex::new(State::Running),
            cv: Condvar::new(),
        });
        t.insert(key, slot.clone());
        Some(Started {
            ahead: self,
            key,
            slot: Some(slot),
        })
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

fn worker(rx: &std::sync::Mutex<Receiver<Job>>, table: &Table) {
    loop {
        let job = {
            let Ok(rx) = rx.lock() else { return };
            match rx.recv() {
                Ok(j) => j,
                Err(_) => return, // the pool was dropped
            }
        };
        let Job { key, slot, work } = job;
        {
            let mut s = slot.state.lock();
            if !matches!(*s, State::Queued) {
                continue; // a reader claimed it
            }
            *s = State::Running;
        }
        // A panic in a decoder must not leave readers waiting forever.
        let v = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or(None);
        finish(table, key, &slot, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn block(n: u8) -> Option<Block> {
        Some(Arc::new(vec![n; 4].into()))
    }

    #[test]
    fn queued_blocks_are_claimed_or_decoded() {
        let a = Ahead::new(1);
        let gate = Arc::new(std::sync::Barrier::new(2));
        // Block the only worker so the next job stays queued.
        let g = gate.clone();
        assert!(a.submit(
            (1, 0, 0),
            Box::new(move || {
                g.wait();
                block(7)
            })
        ));
        assert!(a.submit((1, 0, 1), Box::new(|| block(9))));
        assert!(
            !a.submit((1, 0, 1), Box::new(|| block(9))),
            "already queued"
        );
        // Wait until the worker runs job 0.
        let s0 = a.lookup(&(1, 0, 0)).unwrap();
        while matches!(*s0.state.lock(), State::Queued) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let s1 = a.lookup(&(1, 0, 1)).unwrap();
        assert!(matches!(a.claim(&s1), Claim::Mine));
        a.finish((1, 0, 1), &s1, None);
        assert!(a.lookup(&(1, 0, 1)).is_none());
        gate.wait();
        match a.claim(&s0) {
            Claim::Done(Some(b)) => assert_eq!(&b[..], &[7; 4]),
            _ => panic!("running block not waited for"),
        }
        while a.in_flight() > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A block a reader decodes itself is waited for by the others; one
    /// abandoned releases them.
    #[test]
    fn started_blocks_are_waited_for() {
        let a = Arc::new(Ahead::new(0));
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

    #[test]
    fn failing_or_panicking_jobs_release_waiters() {
        let a = Ahead::new(2);
        assert!(a.submit((2, 0, 0), Box::new(|| None)));
        assert!(a.submit((2, 0, 1), Box::new(|| panic!("decoder bug"))));
        for i in 0..2 {
            if let Some(s) = a.lookup(&(2, 0, i)) {
                match a.claim(&s) {
                    Claim::Mine => a.finish((2, 0, i), &s, None),
                    Claim::Done(v) => assert!(v.is_none()),
                }
            }
        }
        let off = Ahead::new(0);
        assert!(!off.submit((3, 0, 0), Box::new(|| block(1))));
    }

    /// The scheduling policy of the thread `spawn` runs a chore on; with
    /// no pool, `spawn` must refuse the chore.
    fn chore_policy(spawn: fn(&Ahead, Chore) -> bool) -> i32 {
        let (tx, rx) = std::sync::mpsc::channel();
        // SAFETY: sched_getscheduler(0) only reads the calling thread's policy.
        let chore: Chore =
            Box::new(move || tx.send(unsafe { libc::sched_getscheduler(0) }).unwrap());
        assert!(spawn(&Ahead::new(1), chore));
        assert!(!spawn(&Ahead::new(0), Box::new(|| {})));
        rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap()
    }

    /// Chores run on their own thread at idle priority; with no pool they
    /// are refused.
    #[test]
    fn chores_run_at_idle_priority() {
        let policy = chore_policy(Ahead::spawn);
        // Where a sandbox forbids the call, no thread can be idle: check that
        // one can before asking it of the chore thread.
        let can = std::thread::spawn(|| {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: pid 0 is this scratch thread; `param` is valid.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 }
        })
        .join()
        .unwrap();
        if can {
            assert_eq!(policy, libc::SCHED_IDLE);
        }
    }

    /// I/O chores (read-ahead hints) run at normal priority: at idle
    /// priority a hint waits for as long as anything else keeps the CPUs
    /// busy, so on a loaded machine the reads it was for would fetch their
    /// chunk headers from disk themselves before it ran.
    #[test]
    fn io_chores_run_at_normal_priority() {
        assert_eq!(chore_policy(Ahead::spawn_io), libc::SCHED_OTHER);
    }
}
