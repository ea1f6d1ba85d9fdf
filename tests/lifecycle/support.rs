//! Helpers of the lifecycle tests: mounting, bounded waits, and cleaning up
//! after mounts that may hang.

use super::common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary under test (`BLOSCFS_TEST_BIN` runs these tests against
/// another build, e.g. an older one, to see them fail).
pub fn bin() -> PathBuf {
    std::env::var_os("BLOSCFS_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_bloscfs")))
}

pub fn fuse_available() -> bool {
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
pub fn mount_dev(mp: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    bloscfs::mounts::parse_mountinfo(&info)
        .into_iter()
        .rev()
        .find(|(p, _, _)| p == mp)
        .map(|(_, _, dev)| dev)
}

pub fn is_mounted(mp: &Path) -> bool {
    mount_dev(mp).is_some()
}

pub fn wait_for(cond: impl Fn() -> bool, what: &str) {
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
pub fn run_quiet(mut cmd: Command, secs: u64) {
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
pub fn abort_connection(dev: &str) {
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
pub struct Cleanup {
    /// Mount points, with the devices of the mounts made there.
    pub mounts: Vec<(PathBuf, Vec<String>)>,
    pub children: Vec<Child>,
}

impl Cleanup {
    pub fn mounted(&mut self, mp: &Path) {
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
pub fn run_bounded(
    mut cmd: Command,
    secs: u64,
    keep: &mut Cleanup,
) -> Option<(bool, String, String)> {
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
pub fn mount_daemon(src: &Path, mp: &Path, extra: &[&str], keep: &mut Cleanup) -> (bool, String) {
    keep.mounted(mp);
    let mut cmd = Command::new(bin());
    cmd.args(extra).arg(src).arg(mp);
    let (ok, _, err) = run_bounded(cmd, 30, keep).expect("bloscfs did not return");
    keep.mounted(mp);
    (ok, err)
}

/// A foreground mount (`bloscfs -f`) as a child process, ready.
pub fn mount_foreground(src: &Path, mp: &Path, extra: &[&str], keep: &mut Cleanup) -> u32 {
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

pub fn fusermount_u(mp: &Path) {
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

pub fn source_with_fixtures(dir: &Path) -> PathBuf {
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

/// Paths the descriptors of process `pid` are open on.
pub fn open_paths(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .map(|p| p.to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}
