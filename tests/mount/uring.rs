//! FUSE over io_uring (`-o uring`). Where the kernel offers it (the `fuse`
//! module's `enable_uring`, which `scripts/test.sh` sets in CI), requests
//! come through one queue per CPU, served by threads pinned to that CPU,
//! and the files read the same as through `/dev/fuse`; `-o uring=off`
//! takes none through the queues.

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

/// The daemon's threads named `fuser-q*` and the CPUs each may run on.
fn queue_threads(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let t = t.unwrap().path();
        let comm = std::fs::read_to_string(t.join("comm")).unwrap_or_default();
        if !comm.starts_with("fuser-q") {
            continue;
        }
        let status = std::fs::read_to_string(t.join("status")).unwrap_or_default();
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or("")
            .trim()
            .to_string();
        out.push((comm.trim().to_string(), cpus));
    }
    out.sort();
    out
}

#[test]
fn requests_come_through_per_cpu_queues_when_the_kernel_offers_them() {
    if !fuse_available() || !offered() {
        return;
    }
    let mut m = Mount::foreground(&["-o", "xattr"]);
    let mp = m.mp();
    reads_exactly(&mp);
    let taken = stat(&mp, "fuse_ring_requests");
    assert!(taken > 0, "no request came through the queues");
    // One queue per possible CPU, each thread pinned to its queue's CPU
    // (this process may run on every CPU here).
    let pid = m.child.as_ref().unwrap().id();
    let threads = queue_threads(pid);
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert!(threads.len() >= cpus, "{threads:?}");
    for (name, allowed) in &threads {
        let q = name["fuser-q".len()..].split('-').next().unwrap();
        assert_eq!(allowed, q, "{name} may run on {allowed}");
    }
    m.unmount();

    let mut m = Mount::foreground(&["-o", "xattr,uring=off"]);
    let mp = m.mp();
    reads_exactly(&mp);
    assert_eq!(stat(&mp, "fuse_ring_requests"), 0);
    assert!(queue_threads(m.child.as_ref().unwrap().id()).is_empty());
    m.unmount();
}
