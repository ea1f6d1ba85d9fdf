//! The threads bloscfs decodes ahead on: [`Pool`], a [`Runner`] for
//! `blosc-decode`'s jobs.
//!
//! The decoder starts no thread of its own; a caller that wants decoding
//! ahead of sequential readers (and blocks of scattered reads decoded in
//! parallel) hands an [`Env`] a runner. This one has, each started on its
//! first job or all at once by [`Pool::start`]:
//!
//! - `bloscfs-ahead-N`: `workers` threads taking [`JobKind::Decode`] jobs
//!   from one queue;
//! - `bloscfs-spares`: one thread at `SCHED_IDLE` for [`JobKind::Spare`]
//!   jobs (mapping spare block buffers), so that it runs only on an
//!   otherwise idle CPU and never delays a reader's decoding on the same
//!   CPU (a thread cannot always come back from `SCHED_IDLE` unprivileged,
//!   hence a thread of its own rather than switching a worker back and
//!   forth);
//! - `bloscfs-hints`: one thread at normal priority for [`JobKind::Hint`]
//!   jobs (asking the kernel to read ahead): cheap in CPU and wanted soon,
//!   so they must not wait for an idle CPU.
//!
//! Each queue holds [`QUEUE`] jobs; a full one refuses further jobs (the
//! decoder then does without). A job that panics does not take its thread
//! with it.
//!
//! ```
//! use blosc_decode::Env;
//! use std::sync::Arc;
//!
//! let env = Env::with_runner(64 << 20, Arc::new(bloscfs_pool::Pool::per_cpu()));
//! assert!(env.ahead.workers() >= 1);
//! ```
//!
//! [`Env`]: blosc_decode::Env

use blosc_decode::ahead::{Job, JobKind, Runner};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};

/// Jobs waiting at most in each queue; a full queue refuses further jobs.
pub const QUEUE: usize = 256;

/// Threads for decode, spare and hint jobs, each started on first use.
pub struct Pool {
    workers: usize,
    decode: OnceLock<Mutex<SyncSender<Job>>>,
    spares: OnceLock<Mutex<SyncSender<Job>>>,
    hints: OnceLock<Mutex<SyncSender<Job>>>,
}

impl Pool {
    /// `workers` decode threads (0: a pool that refuses every job).
    pub fn new(workers: usize) -> Self {
        Pool {
            workers,
            decode: OnceLock::new(),
            spares: OnceLock::new(),
            hints: OnceLock::new(),
        }
    }

    /// One decode thread per CPU the process may use.
    pub fn per_cpu() -> Self {
        Pool::new(std::thread::available_parallelism().map_or(2, |n| n.get()))
    }

    /// Start every thread now, each decode thread with its codecs' state
    /// made (`blosc_decode::codec::prepare_thread`): a mount's first read
    /// then neither spawns threads nor sets them up on its path.
    pub fn start(&self) {
        if self.workers > 0 {
            for kind in [JobKind::Decode, JobKind::Spare, JobKind::Hint] {
                self.queue(kind);
            }
        }
    }

    /// The queue of `kind`'s jobs, its threads started on first use.
    fn queue(&self, kind: JobKind) -> &Mutex<SyncSender<Job>> {
        match kind {
            JobKind::Decode => self.decode.get_or_init(|| {
                let names = (0..self.workers).map(|i| format!("bloscfs-ahead-{i}"));
                start(names.collect(), false, blosc_decode::codec::prepare_thread)
            }),
            JobKind::Spare => self
                .spares
                .get_or_init(|| start(vec!["bloscfs-spares".into()], true, || {})),
            JobKind::Hint => self
                .hints
                .get_or_init(|| start(vec!["bloscfs-hints".into()], false, || {})),
        }
    }
}

impl Runner for Pool {
    fn workers(&self) -> usize {
        self.workers
    }

    fn run(&self, kind: JobKind, job: Job) -> bool {
        if self.workers == 0 {
            return false;
        }
        let Ok(tx) = self.queue(kind).lock() else {
            return false;
        };
        tx.try_send(job).is_ok()
    }
}

/// A thread of each name (`idle`: at `SCHED_IDLE`) taking jobs from one
/// queue, each running `prepare` first.
fn start(names: Vec<String>, idle: bool, prepare: fn()) -> Mutex<SyncSender<Job>> {
    let (tx, rx) = sync_channel::<Job>(QUEUE);
    let rx = Arc::new(Mutex::new(rx));
    for name in names {
        let rx = rx.clone();
        let spawned = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                prepare();
                serve(&rx, idle)
            });
        if let Err(e) = spawned {
            log::warn!("cannot start the {name} thread: {e}");
        }
    }
    Mutex::new(tx)
}

/// A thread's life: run jobs until the pool is dropped.
fn serve(rx: &Mutex<Receiver<Job>>, idle: bool) {
    if idle {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is this thread; `param` is valid.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    }
    loop {
        let job = {
            let Ok(rx) = rx.lock() else { return };
            match rx.recv() {
                Ok(j) => j,
                Err(_) => return, // the pool was dropped
            }
        };
        // A job's panic must not end the thread (later jobs would be
        // queued with nobody to run them).
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

#[cfg(test)]
mod tests;
