//! Stalled remote reads (answers the fault server holds until released):
//! they never hold every FUSE thread, so a healthy file reads meanwhile,
//! and SIGTERM ends the daemon and its mount whatever is in flight.

use crate::common::*;
use crate::harness::*;
use crate::listings::{post, Release};
use crate::servers::*;
use std::time::Duration;

/// FUSE worker threads a remote mount had by default before it was sized
/// by its waits: the CPUs, at least 2.
fn cpu_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .max(2)
}

/// A fault server over `k` small files `held0`.. and `healthy.txt`, and
/// a mount of it whose requests never time out while held.
fn held_tree(d: &std::path::Path, k: usize) -> Option<(Faulty, RemoteMount)> {
    for i in 0..k {
        std::fs::write(d.join(format!("held{i}")), format!("held {i}\n")).unwrap();
    }
    std::fs::write(d.join("healthy.txt"), b"healthy\n").unwrap();
    let f = Faulty::start(d)?;
    let m = Remote::http(&f).mount(&["timeout=600"]);
    assert_eq!(std::fs::read_dir(m.mp()).unwrap().count(), k + 1);
    f.reset();
    post(&f, "/_hold?prefix=/held");
    Some((f, m))
}

/// As many reads of held files in flight as a remote mount once had
/// threads (all arrived at the server), then a healthy file: it reads
/// whole while they are still held.
#[test]
fn a_stalled_read_does_not_hold_up_a_healthy_file() {
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let k = cpu_threads();
    let Some((f, mut m)) = held_tree(d.path(), k) else {
        return;
    };
    let release = Release(&f);
    let readers: Vec<_> = (0..k)
        .map(|i| {
            let p = m.path(&format!("held{i}"));
            std::thread::spawn(move || std::fs::read(p))
        })
        .collect();
    wait_for(
        || f.stats()["held"].as_u64() == Some(k as u64),
        "every held read to reach the server",
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let p = m.path("healthy.txt");
    std::thread::spawn(move || tx.send(std::fs::read(p).map_err(|e| e.to_string())));
    // Bounded so that a read stuck behind the held ones fails the test
    // instead of hanging it (they are held until released below).
    let got = rx.recv_timeout(Duration::from_secs(60));
    assert_eq!(
        got,
        Ok(Ok(b"healthy\n".to_vec())),
        "a healthy file while {k} reads are held\n{}",
        m.log()
    );
    drop(release);
    for (i, r) in readers.into_iter().enumerate() {
        assert_eq!(r.join().unwrap().unwrap(), format!("held {i}\n").as_bytes());
    }
    m.unmount();
}

/// Has process `pid` (our child) ended? (A zombie until reaped.)
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

/// SIGTERM while a read waits for an answer the server holds: the daemon
/// ends and its mount is gone without the answer being released, and the
/// reader gets an error, not bytes.
#[test]
fn sigterm_ends_the_daemon_while_a_read_is_held() {
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let Some((f, m)) = held_tree(d.path(), 1) else {
        return;
    };
    let _release = Release(&f);
    let p = m.path("held0");
    let reader = std::thread::spawn(move || std::fs::read(p));
    wait_for(
        || f.stats()["held"].as_u64() == Some(1),
        "the held read to reach the server",
    );
    let pid = m.pid();
    // SAFETY: a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    // Bounded so that a daemon waiting for the held answer fails the test
    // instead of hanging it.
    let t = std::time::Instant::now();
    while !ended(pid) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the daemon still runs after SIGTERM\n{}",
            m.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!is_mounted(&m.mp()), "mounted after the daemon ended");
    let got = reader.join().unwrap();
    assert!(got.is_err(), "the held read gave {got:?}");
    assert_eq!(f.stats()["held"].as_u64(), Some(1), "released early");
    assert!(!m.log().contains("panicked"), "{}", m.log());
}
