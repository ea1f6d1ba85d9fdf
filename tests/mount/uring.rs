//! FUSE over io_uring (`-o uring`). Where the kernel offers it (the `fuse`
//! module's `enable_uring`, which `scripts/test.sh` sets in CI), requests
//! come through one queue per CPU, each with threads of its own, and the
//! files read the same as through `/dev/fuse`; without the option none
//! come through the queues.

use crate::ahead::stat;
use crate::common::*;
use crate::mount::{sh, Mount};
use std::path::Path;

const PARAM: &str = "/sys/module/fuse/parameters/enable_uring";

/// Is FUSE over io_uring offered? In CI it must be.
fn offered() -> bool {
    let on = std::fs::read_to_string(PARAM).is_ok_and(|v| v.trim() == "Y");
    if !on {
        assert!(
            std::env::var_os("CI").is_none(),
            "{PARAM} is not Y and CI is set: scripts/test.sh sets it"
        );
        eprintln!("SKIPPING the io_uring tests: {PARAM} is not Y");
    }
    on
}

/// The mount's files read as their references: the whole frame, a window
/// of it by `dd`, and the `.npy` of a b2nd array by numpy.
fn reads_exactly(mp: &Path) {
    let want = reference_bytes("frame/blocks-lz4.b2frame");
    assert_eq!(std::fs::read(mp.join("series")).unwrap(), want);
    let o = sh(&format!(
        "dd if={}/series bs=4096 skip=300 count=2 status=none",
        mp.display()
    ));
    assert_eq!(o.stdout, want[300 * 4096..302 * 4096]);
    assert_eq!(
        std::fs::read(mp.join("delta")).unwrap(),
        reference_bytes("frame/blocks-delta.b2frame")
    );
}

/// The daemon's threads serving io_uring queues (named `fuser-qCPU-N`):
/// the queue of each.
fn queue_threads(pid: u32) -> Vec<usize> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let comm = std::fs::read_to_string(t.unwrap().path().join("comm")).unwrap_or_default();
        if let Some(q) = comm.trim().strip_prefix("fuser-q") {
            out.push(q.split('-').next().unwrap().parse().unwrap());
        }
    }
    out.sort();
    out
}

#[test]
fn requests_come_through_per_cpu_queues_when_asked_and_offered() {
    if !fuse_available() || !offered() {
        return;
    }
    let mut m = Mount::foreground(&["-o", "xattr,uring"]);
    let mp = m.mp();
    reads_exactly(&mp);
    let taken = stat(&mp, "fuse_ring_requests");
    assert!(taken > 0, "no request came through the queues");
    // Every possible CPU's queue has a thread (the kernel sends nothing
    // through the queues until each has one).
    let queues = queue_threads(m.child.as_ref().unwrap().id());
    let possible = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap();
    let last: usize = possible
        .trim()
        .rsplit(['-', ','])
        .next()
        .unwrap()
        .parse()
        .unwrap();
    for q in 0..=last {
        assert!(queues.contains(&q), "no thread for queue {q}: {queues:?}");
    }
    m.unmount();

    let mut m = Mount::foreground(&["-o", "xattr"]);
    let mp = m.mp();
    reads_exactly(&mp);
    assert_eq!(stat(&mp, "fuse_ring_requests"), 0);
    assert!(queue_threads(m.child.as_ref().unwrap().id()).is_empty());
    m.unmount();
}
