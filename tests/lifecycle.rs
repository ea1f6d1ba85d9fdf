//! Real mounts over their lifetime: where they may be mounted, unmounting
//! and mounting again, descriptors of deleted sources, descriptor
//! exhaustion, and the log file. Needs /dev/fuse and fusermount3: in CI
//! (CI set) their absence fails the tests; elsewhere they are skipped with
//! a message.
//!
//! A daemon that reads its own mount hangs its readers unkillably: every
//! wait here is bounded, and a mount left hanging is aborted (fusectl's
//! `abort`, `umount -f`) before it is unmounted.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary under test (`BLOSCFS_TEST_BIN` runs these tests against
/// another build, e.g. an older one, to see them fail).
fn bin() -> PathBuf {
    std::env::var_os("BLOSCFS_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_bloscfs")))
}

fn fuse_available() -> bool {
    let ok = Path::new("/dev/fuse").exists()
        && Command::new("fusermount3")
            .arg("-V")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("FUSE is not available (/dev/fuse or fusermount3 missing) and CI is set: mount tests must run");
        }
        eprintln!("SKIPPING mount tests: /dev/fuse or fusermount3 missing (set CI=1 to make this a failure)");
    }
    ok
}

/// The device (maj:min) of the topmost mount at `mp`, if any.
fn mount_dev(mp: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    bloscfs::mounts::parse_mountinfo(&info)
        .into_iter()
        .rev()
        .find(|(p, _, _)| p == mp)
        .map(|(_, _, dev)| dev)
}

fn is_mounted(mp: &Path) -> bool {
    mount_dev(mp).is_some()
}

fn wait_for(cond: impl Fn() -> bool, what: &str) {
    let t = Instant::now();
    while !cond() {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run `cmd` for at most `secs`, its output discarded; left running past
/// that (a command stuck on a hung mount cannot be waited for).
fn run_quiet(mut cmd: Command, secs: u64) {
    let Ok(mut child) = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return;
    };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(secs) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
}

/// Abort the FUSE connection of device `dev` (maj:min): its waiting
/// readers then fail instead of hanging. Needs fusectl (mounted here if
/// it is not, as root can).
fn abort_connection(dev: &str) {
    let conns = Path::new("/sys/fs/fuse/connections");
    if std::fs::read_dir(conns).map_or(true, |mut d| d.next().is_none()) {
        let mut c = Command::new("mount");
        c.args(["-t", "fusectl", "fusectl"]).arg(conns);
        run_quiet(c, 5);
    }
    let minor = dev.split(':').nth(1).unwrap_or("0");
    let _ = std::fs::write(conns.join(minor).join("abort"), b"1");
}

/// Unmounts what a test mounted (aborting each connection first: a daemon
/// that hangs on its own mount cannot answer, and nothing may wait on it),
/// and kills what it started, whatever way the test ends. Never looks into
/// a mount.
#[derive(Default)]
struct Cleanup {
    /// Mount points, with the devices of the mounts made there.
    mounts: Vec<(PathBuf, Vec<String>)>,
    children: Vec<Child>,
}

impl Cleanup {
    fn mounted(&mut self, mp: &Path) {
        let dev = mount_dev(mp);
        match self.mounts.iter_mut().find(|(p, _)| p == mp) {
            Some((_, devs)) => devs.extend(dev),
            None => self
                .mounts
                .push((mp.to_path_buf(), dev.into_iter().collect())),
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            // A test that passed unmounted its mounts; a daemon still
            // mounted is unmounted politely.
            for (mp, _) in &self.mounts {
                if is_mounted(mp) {
                    let mut c = Command::new("fusermount3");
                    c.arg("-u").arg(mp);
                    run_quiet(c, 5);
                }
            }
        }
        for (mp, devs) in self.mounts.iter().rev() {
            for dev in devs.iter().cloned().chain(mount_dev(mp)) {
                if std::thread::panicking() {
                    abort_connection(&dev);
                }
            }
            for _ in 0..4 {
                if !is_mounted(mp) {
                    break;
                }
                let mut c = Command::new("fusermount3");
                c.args(["-u", "-z"]).arg(mp);
                run_quiet(c, 5);
                let mut c = Command::new("umount");
                c.arg("-l").arg(mp);
                run_quiet(c, 5);
            }
        }
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Run `cmd` for at most `secs`: its output, or `None` if it did not end
/// (it is left running, to be killed once the mounts it waits on are
/// aborted).
fn run_bounded(mut cmd: Command, secs: u64, keep: &mut Cleanup) -> Option<(bool, String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let (o, e) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(secs) {
        if let Some(st) = child.try_wait().unwrap() {
            return Some((
                st.success(),
                std::fs::read_to_string(&o).unwrap(),
                std::fs::read_to_string(&e).unwrap(),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    keep.children.push(child);
    None
}

/// A daemonized mount (`bloscfs [extra] SRC MP`): whether it succeeded,
/// and its stderr.
/// `mp` must be canonical (it is looked for in the mount table).
fn mount_daemon(src: &Path, mp: &Path, extra: &[&str], keep: &mut Cleanup) -> (bool, String) {
    keep.mounted(mp);
    let mut cmd = Command::new(bin());
    cmd.args(extra).arg(src).arg(mp);
    let (ok, _, err) = run_bounded(cmd, 30, keep).expect("bloscfs did not return");
    keep.mounted(mp);
    (ok, err)
}

/// A foreground mount (`bloscfs -f`) as a child process, ready.
fn mount_foreground(src: &Path, mp: &Path, extra: &[&str], keep: &mut Cleanup) -> u32 {
    keep.mounted(mp);
    let child = Command::new(bin())
        .arg("-f")
        .args(extra)
        .arg(src)
        .arg(mp)
        .spawn()
        .unwrap();
    let pid = child.id();
    keep.children.push(child);
    wait_for(|| is_mounted(mp), "the mount");
    keep.mounted(mp);
    pid
}

fn fusermount_u(mp: &Path) {
    // (Not bounded: only called on mounts a test found working.)
    for _ in 0..50 {
        if Command::new("fusermount3")
            .arg("-u")
            .arg(mp)
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
            || !is_mounted(mp)
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("fusermount3 -u {} kept failing", mp.display());
}

fn source_with_fixtures(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    copy(
        &fixture("frame/blocks-lz4.b2frame"),
        &src.join("series.b2frame"),
    );
    copy(&fixture("b2nd/array1-2d.b2nd"), &src.join("grid.b2nd"));
    std::fs::write(src.join("notes.txt"), b"plain text\n").unwrap();
    src
}

/// A mount point equal to the source, inside it, or holding it is refused
/// at start with a message that says why; nothing is mounted.
#[test]
fn mount_point_inside_its_source_is_refused() {
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // After `d`: dropped first, so no mount is left when `d` is removed.
    let mut keep = Cleanup::default();
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
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // After `d`: dropped first, so no mount is left when `d` is removed.
    let mut keep = Cleanup::default();
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
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // After `d`: dropped first, so no mount is left when `d` is removed.
    let mut keep = Cleanup::default();
    let src = source_with_fixtures(d.path());
    let mp = d.path().join("mnt");
    std::fs::create_dir_all(&mp).unwrap();
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

/// Paths the descriptors of process `pid` are open on.
fn open_paths(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .map(|p| p.to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A container read once and closed, then deleted from the source: the
/// daemon closes its descriptors within seconds (its disk space is freed).
#[test]
fn deleted_sources_are_closed_within_seconds() {
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut keep = Cleanup::default();
    let src = source_with_fixtures(d.path());
    let mp = d.path().join("mnt");
    std::fs::create_dir_all(&mp).unwrap();
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
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut keep = Cleanup::default();
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
    wait_for(|| is_mounted(&mp), "the mount");
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
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut keep = Cleanup::default();
    let src = source_with_fixtures(d.path());
    let mp = d.path().join("mnt");
    std::fs::create_dir_all(&mp).unwrap();
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
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut keep = Cleanup::default();
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
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut keep = Cleanup::default();
    let src = source_with_fixtures(d.path());
    let mp = d.path().join("mnt");
    std::fs::create_dir_all(&mp).unwrap();
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
