//! Real mounts over their lifetime: where they may be mounted, unmounting
//! and mounting again, descriptors of deleted sources, descriptor
//! exhaustion, and the log file. Needs /dev/fuse and fusermount3: in CI
//! (CI set) their absence fails the tests; elsewhere they are skipped with
//! a message.
//!
//! A daemon that reads its own mount hangs its readers unkillably: every
//! wait here is bounded, and a mount left hanging is aborted (fusectl's
//! `abort`, `umount -f`) before it is unmounted.

use crate::common;
mod support;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::*;

/// A mount point equal to the source, inside it, or holding it is refused
/// at start with a message that says why; nothing is mounted.
#[test]
fn mount_point_inside_its_source_is_refused() {
    let Some((d, mut keep)) = start() else {
        return;
    };
    let src = source_with_fixtures(d.path());
    let inner = src.join("mnt");
    std::fs::create_dir_all(&inner).unwrap();
    let holder = d.path().join("holder");
    std::fs::create_dir_all(holder.join("src2")).unwrap();
    // The mount point named through a symlink and `..`: compared canonical.
    std::os::unix::fs::symlink(&src, d.path().join("link")).unwrap();
    let via_link = d.path().join("link/mnt/../mnt");
    // (Paths made canonical before anything is mounted: a mount that
    // reads itself hangs whoever looks into it.)
    let cases = [
        (src.clone(), inner.clone(), "inside the source"),
        (src.clone(), via_link, "inside the source"),
        (src.clone(), src.clone(), "is the source itself"),
        (
            holder.join("src2"),
            holder.clone(),
            "is inside the mount point",
        ),
    ]
    .map(|(s, m, why)| (s, m.canonicalize().unwrap(), m, why));
    for (s, real, m, why) in cases {
        keep.mounted(&real);
        let mut cmd = Command::new(bin());
        cmd.arg(&s).arg(&m);
        let (ok, _, err) = run_bounded(cmd, 30, &mut keep).expect("bloscfs did not return");
        keep.mounted(&real);
        assert!(!ok, "mounting {} on {} succeeded", s.display(), m.display());
        assert!(err.contains(why), "{}: {err}", m.display());
        assert!(!is_mounted(&real), "{} got mounted", real.display());
    }
}

/// Two mounts, each inside the other's source: listing either shows its
/// source without the other's mount point (a FUSE mount met inside the
/// source is skipped, and a lookup of it fails), and `find` ends.
#[test]
fn fuse_mounts_inside_the_source_are_skipped() {
    let Some((d, mut keep)) = start() else {
        return;
    };
    let s1 = source_with_fixtures(&d.path().join("one"));
    let s2 = source_with_fixtures(&d.path().join("two"));
    let (m1, m2) = (s2.join("m1"), s1.join("m2"));
    std::fs::create_dir_all(&m1).unwrap();
    std::fs::create_dir_all(&m2).unwrap();
    std::fs::write(m2.join("under-m2"), b"hidden by the mount\n").unwrap();
    mount_foreground(&s1, &m1, &[], &mut keep);
    mount_foreground(&s2, &m2, &[], &mut keep);
    let mut find = Command::new("find");
    find.arg(&m1);
    let out = run_bounded(find, 20, &mut keep);
    let Some((ok, out, err)) = out else {
        panic!(
            "find {} hung (each daemon reads the other's mount)",
            m1.display()
        );
    };
    assert!(ok, "find failed: {err}");
    let names: Vec<&str> = out.lines().collect();
    assert!(
        names.contains(&m1.join("series").to_str().unwrap()),
        "{out}"
    );
    assert!(
        names.contains(&m1.join("grid.npy").to_str().unwrap()),
        "{out}"
    );
    assert!(
        !out.contains("m2"),
        "the other mount was looked into: {out}"
    );
    // Through the other mount likewise, and a lookup of the skipped name fails.
    let mut ls = Command::new("ls");
    ls.arg(&m2);
    let (ok, out, _) = run_bounded(ls, 20, &mut keep).expect("ls hung");
    assert!(ok && out.contains("series") && !out.contains("m1"), "{out}");
    let err = std::fs::symlink_metadata(m1.join("m2")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
    fusermount_u(&m2);
    fusermount_u(&m1);
}

/// Unmounted after reads, and mounted again at once: the new mount stays
/// (the old daemon, on its way out, must not unmount it).
#[test]
fn a_remount_right_after_an_unmount_stays() {
    let Some((_d, mut keep, src, mp)) = start_with_source() else {
        return;
    };
    let want = reference_bytes("frame/blocks-lz4.b2frame");
    for round in 0..10 {
        let (ok, err) = mount_daemon(&src, &mp, &[], &mut keep);
        assert!(ok, "round {round}: mount failed: {err}");
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let p = mp.join("series");
                std::thread::spawn(move || {
                    for _ in 0..5 {
                        std::fs::read(&p).unwrap();
                    }
                })
            })
            .collect();
        for r in readers {
            r.join().unwrap();
        }
        fusermount_u(&mp);
        // At once, without waiting for the old daemon to exit.
        let (ok, err) = mount_daemon(&src, &mp, &[], &mut keep);
        assert!(ok, "round {round}: remount failed: {err}");
        std::thread::sleep(Duration::from_millis(1200));
        assert!(
            is_mounted(&mp),
            "round {round}: the new mount was undone within a second"
        );
        assert_eq!(std::fs::read(mp.join("series")).unwrap(), want);
        fusermount_u(&mp);
    }
}

/// A container read once and closed, then deleted from the source: the
/// daemon closes its descriptors within seconds (its disk space is freed).
#[test]
fn deleted_sources_are_closed_within_seconds() {
    let Some((_d, mut keep, src, mp)) = start_with_source() else {
        return;
    };
    let pid = mount_foreground(&src, &mp, &[], &mut keep);
    let want = reference_bytes("frame/blocks-lz4.b2frame");
    assert_eq!(std::fs::read(mp.join("series")).unwrap(), want);
    let gone = src.join("series.b2frame").to_string_lossy().into_owned();
    assert!(open_paths(pid).iter().any(|p| p.starts_with(&gone)));
    std::fs::remove_file(src.join("series.b2frame")).unwrap();
    let t = Instant::now();
    while open_paths(pid).iter().any(|p| p.starts_with(&gone)) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the daemon still holds the deleted {gone}: {:?}",
            open_paths(pid)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    fusermount_u(&mp);
}

/// The same without a mount: `release_deleted` closes a kept container
/// whose file is gone, and leaves one whose file is there.
#[test]
fn release_deleted_closes_only_deleted_idle_containers() {
    use bloscfs::fs::{Fs, FsOptions, ROOT_INO};
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    copy(
        &fixture("frame/blocks-lz4.b2frame"),
        &src.join("doomed-7f3a.b2frame"),
    );
    copy(
        &fixture("frame/blocks-lz4.b2frame"),
        &src.join("stays-7f3a.b2frame"),
    );
    let fs = Fs::new(&src, &FsOptions::default()).unwrap();
    let me = std::process::id();
    let held = |name: &str| open_paths(me).iter().any(|p| p.contains(name));
    for name in ["doomed-7f3a", "stays-7f3a"] {
        let a = fs.lookup(ROOT_INO, std::ffi::OsStr::new(name)).unwrap();
        let (fh, _) = fs.open(a.ino, false).unwrap();
        assert!(!fs.read(fh, 0, 4096).unwrap().is_empty());
        fs.release(fh);
        assert!(held(name), "{name} not kept open");
    }
    assert_eq!(fs.release_deleted(), 0);
    std::fs::remove_file(src.join("doomed-7f3a.b2frame")).unwrap();
    assert_eq!(fs.release_deleted(), 1);
    assert!(!held("doomed-7f3a"));
    assert!(held("stays-7f3a"));
}

/// Under `ulimit -n 64`: 500 containers read one at a time all read
/// exactly; holding more open than descriptors allow fails those opens with
/// EMFILE (never ENOENT), and once they are closed everything reads again.
#[test]
fn descriptor_exhaustion_fails_only_that_open_and_recovers() {
    let Some((d, mut keep)) = start() else {
        return;
    };
    let src = d.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let n = 500;
    for i in 0..n {
        copy(
            &fixture("frame/lz4-delta-ts8-c.b2frame"),
            &src.join(format!("c{i:03}.b2frame")),
        );
    }
    let want = reference_bytes("frame/lz4-delta-ts8-c.b2frame");
    let mp = d.path().join("mnt");
    std::fs::create_dir_all(&mp).unwrap();
    keep.mounted(&mp);
    let child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" -f \"$1\" \"$2\"")
        .arg(bin())
        .arg(&src)
        .arg(&mp)
        .spawn()
        .unwrap();
    keep.children.push(child);
    wait_for(|| mount_answers(&mp), "the mount");
    keep.mounted(&mp);
    let read_all = |round: &str| {
        for i in 0..n {
            let p = mp.join(format!("c{i:03}"));
            match std::fs::read(&p) {
                Ok(b) => assert_eq!(b, want, "{round}: {}", p.display()),
                Err(e) => panic!("{round}: {}: {e}", p.display()),
            }
        }
        let names = std::fs::read_dir(&mp).unwrap().count();
        assert_eq!(names, n, "{round}: listing");
    };
    read_all("one at a time");
    let mut open = Vec::new();
    let mut refused = 0;
    for i in 0..200 {
        match std::fs::File::open(mp.join(format!("c{i:03}"))) {
            Ok(f) => open.push(f),
            Err(e) => {
                let errno = e.raw_os_error();
                assert!(
                    errno == Some(libc::EMFILE) || errno == Some(libc::ENFILE),
                    "open {i} failed with {e}, not EMFILE"
                );
                refused += 1;
            }
        }
    }
    assert!(
        refused > 0,
        "200 held open under ulimit -n 64: none refused"
    );
    drop(open);
    read_all("after running out");
    fusermount_u(&mp);
}

/// A log file that cannot take lines is refused at start, with its name:
/// a pseudo-file that refuses writes, a fifo (not waited on for a reader),
/// a directory.
#[test]
fn unusable_log_files_are_refused_at_start() {
    let Some((d, mut keep, src, mp)) = start_with_source() else {
        return;
    };
    let fifo = d.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for bad in [Path::new("/proc/version"), &fifo, d.path()] {
        let opt = format!("logfile={}", bad.display());
        for fg in [false, true] {
            let mut cmd = Command::new(bin());
            if fg {
                cmd.arg("-f");
            }
            cmd.args(["-o", &opt]).arg(&src).arg(&mp);
            keep.mounted(&mp);
            let out = run_bounded(cmd, 20, &mut keep);
            keep.mounted(&mp);
            let (ok, _, err) = out.unwrap_or_else(|| panic!("{opt}: bloscfs hung"));
            assert!(!ok, "{opt} (foreground {fg}) was taken");
            assert!(err.contains(&format!("logfile {}", bad.display())), "{err}");
            assert!(!is_mounted(&mp), "{opt}: mounted");
        }
    }
}

/// Two daemons logging every request into one file: every line is whole.
#[test]
fn log_lines_of_daemons_sharing_a_file_are_whole() {
    let Some((d, mut keep)) = start() else {
        return;
    };
    let src = source_with_fixtures(d.path());
    let log = d.path().join("shared.log");
    let opt = format!("logfile={}", log.display());
    let mps: Vec<PathBuf> = (0..2).map(|i| d.path().join(format!("mnt{i}"))).collect();
    for mp in &mps {
        std::fs::create_dir_all(mp).unwrap();
        mount_foreground(&src, mp, &["-d", "-o", &opt], &mut keep);
    }
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let mp = mps[i % 2].clone();
            std::thread::spawn(move || {
                for _ in 0..150 {
                    let _ = std::fs::read(mp.join("series"));
                    let _ = std::fs::read_dir(&mp).map(|d| d.count());
                    let _ = std::fs::metadata(mp.join("notes.txt"));
                }
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    for mp in &mps {
        fusermount_u(mp);
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 1000, "{} lines", lines.len());
    for l in &lines {
        let whole = l.starts_with("bloscfs[")
            && l.matches("bloscfs[").count() == 1
            && ["]: debug: ", "]: info: ", "]: warn: ", "]: error: "]
                .iter()
                .any(|k| l.contains(k));
        assert!(whole, "a broken line: {l:?}");
    }
}

/// A cache larger than physical memory mounts, with a warning.
#[test]
fn a_cache_larger_than_memory_mounts_with_a_warning() {
    let Some((d, mut keep, src, mp)) = start_with_source() else {
        return;
    };
    let log = d.path().join("log");
    let opt = format!("cache_size=1000T,logfile={}", log.display());
    let (ok, err) = mount_daemon(&src, &mp, &["-o", &opt], &mut keep);
    assert!(ok, "{err}");
    let want = reference_bytes("frame/blocks-lz4.b2frame");
    assert_eq!(std::fs::read(mp.join("series")).unwrap(), want);
    fusermount_u(&mp);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("more than the physical memory"), "{text}");
}
