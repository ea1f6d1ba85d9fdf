//! What each kind of job runs on, and what the pool refuses.

use super::*;
use std::sync::mpsc::channel;
use std::time::Duration;

/// Long enough for a thread to pick up a job on a loaded machine; the
/// tests wait this long only when something is wrong.
const PATIENCE: Duration = Duration::from_secs(30);

/// The name and scheduling policy of the thread a `kind` job runs on.
fn where_it_runs(pool: &Pool, kind: JobKind) -> (String, i32) {
    let (tx, rx) = channel();
    let job: Job = Box::new(move || {
        let name = std::thread::current().name().unwrap_or("").to_string();
        // SAFETY: sched_getscheduler(0) only reads the calling thread's policy.
        let policy = unsafe { libc::sched_getscheduler(0) };
        tx.send((name, policy)).unwrap();
    });
    assert!(pool.run(kind, job));
    rx.recv_timeout(PATIENCE).expect("the job ran")
}

/// Can a thread of this process go to `SCHED_IDLE` (a sandbox may forbid
/// it)?
fn idle_allowed() -> bool {
    std::thread::spawn(|| {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is this scratch thread; `param` is valid.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 }
    })
    .join()
    .unwrap()
}

#[test]
fn each_kind_runs_on_its_named_thread_and_priority() {
    let pool = Pool::new(2);
    let (name, policy) = where_it_runs(&pool, JobKind::Decode);
    assert!(name.starts_with("bloscfs-ahead-"), "{name}");
    assert_eq!(policy, libc::SCHED_OTHER);
    // Spare buffers are prepared only on an otherwise idle CPU.
    let (name, policy) = where_it_runs(&pool, JobKind::Spare);
    assert_eq!(name, "bloscfs-spares");
    if idle_allowed() {
        assert_eq!(policy, libc::SCHED_IDLE);
    }
    // Read-ahead hints at normal priority: at idle priority a hint waits
    // for as long as anything else keeps the CPUs busy, so on a loaded
    // machine the reads it was for would fetch their chunk headers from
    // disk themselves before it ran.
    assert_eq!(
        where_it_runs(&pool, JobKind::Hint),
        ("bloscfs-hints".to_string(), libc::SCHED_OTHER)
    );
}

/// `workers` decode jobs run at once: each of two waits for the other.
#[test]
fn decode_jobs_run_on_all_workers_at_once() {
    let pool = Pool::new(2);
    let (tx, rx) = channel();
    let both = Arc::new(std::sync::Barrier::new(2));
    for _ in 0..2 {
        let (both, tx) = (both.clone(), tx.clone());
        assert!(pool.run(
            JobKind::Decode,
            Box::new(move || {
                both.wait();
                tx.send(()).unwrap();
            })
        ));
    }
    for _ in 0..2 {
        rx.recv_timeout(PATIENCE).expect("both jobs ran together");
    }
}

#[test]
fn a_pool_of_no_workers_refuses_every_job() {
    let pool = Pool::new(0);
    for kind in [JobKind::Decode, JobKind::Spare, JobKind::Hint] {
        assert!(!pool.run(kind, Box::new(|| {})));
    }
    assert_eq!(pool.workers(), 0);
}

/// A full queue refuses; a panicking job leaves its thread serving.
#[test]
fn full_queues_refuse_and_panics_are_survived() {
    let pool = Pool::new(1);
    let (gate_tx, gate) = channel::<()>();
    let (started_tx, started) = channel();
    assert!(pool.run(
        JobKind::Decode,
        Box::new(move || {
            started_tx.send(()).unwrap();
            let _ = gate.recv();
        })
    ));
    started.recv_timeout(PATIENCE).expect("the worker took it");
    assert!(pool.run(JobKind::Decode, Box::new(|| panic!("a decoder bug"))));
    let (drained_tx, drained) = channel();
    for _ in 2..QUEUE {
        assert!(pool.run(JobKind::Decode, Box::new(|| {})));
    }
    assert!(pool.run(
        JobKind::Decode,
        Box::new(move || drained_tx.send(()).unwrap())
    ));
    assert!(
        !pool.run(JobKind::Decode, Box::new(|| {})),
        "the queue is full"
    );
    drop(gate_tx);
    // The one worker runs every job queued after the panic.
    drained
        .recv_timeout(PATIENCE)
        .expect("the worker survived the panic");
}
