//! Helpers of the lifecycle tests: mounting, bounded waits, and cleaning up
//! after mounts that may hang.

use super::common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    wait_for(|| mount_answers(mp), "the mount");
    keep.mounted(mp);
    pid
}

pub fn fusermount_u(mp: &Path) {
    // (Not bounded: only called on mounts a test found working.)
    if try_unmount(mp).is_err() {
        panic!("fusermount3 -u {} kept failing", mp.display());
    }
}

/// The start of a mount test: `None` (the test is skipped) without FUSE,
/// else a temporary directory and the `Cleanup` of what the test mounts.
/// Bound in this order (`let Some((d, mut keep)) = start()`), `keep` is
/// dropped first: no mount is left when `d` is removed.
pub fn start() -> Option<(tempfile::TempDir, Cleanup)> {
    if !fuse_available() {
        return None;
    }
    Some((tempfile::tempdir().unwrap(), Cleanup::default()))
}

/// `start`, with a source of fixtures (`source_with_fixtures`) and an empty
/// mount point `mnt` in the directory: `(d, keep, src, mp)`.
pub fn start_with_source() -> Option<(tempfile::TempDir, Cleanup, PathBuf, PathBuf)> {
    let (d, keep) = start()?;
    let src = source_with_fixtures(d.path());
    let mp = d.path().join("mnt");
    std::fs::create_dir_all(&mp).unwrap();
    Some((d, keep, src, mp))
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
