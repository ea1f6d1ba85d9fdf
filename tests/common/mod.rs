//! Helpers shared by the daemon's integration tests: the fixture helpers
//! (shared with the library's tests) and those that need `bloscfs`.
#![allow(dead_code)]

mod fixtures;
pub use fixtures::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The sorted names listed in directory `ino` of `fs`.
pub fn names(fs: &bloscfs::fs::Fs, ino: u64) -> Vec<String> {
    let mut v: Vec<String> = fs
        .readdir(ino)
        .unwrap()
        .into_iter()
        .map(|e| e.name.to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The binary under test (`BLOSCFS_TEST_BIN` runs the tests against
/// another build, e.g. an older one, to see them fail).
pub fn bin() -> PathBuf {
    std::env::var_os("BLOSCFS_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_bloscfs")))
}

/// A `PATH` that finds the binary under test as `bloscfs` first (a link in
/// a directory made in `dir`): `mount.fuse3` runs `bloscfs` from `PATH`.
pub fn path_with_bin(dir: &Path) -> String {
    let bin_dir = dir.join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    std::os::unix::fs::symlink(bin(), bin_dir.join("bloscfs")).unwrap();
    format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Whether /dev/fuse and fusermount3 are there, for the mount tests: in CI
/// (CI set) their absence is a failure; elsewhere the tests are skipped with
/// a message.
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

/// A python with numpy and blosc2: $BLOSCFS_PYTHON, the project's .venv, or
/// python3 if it has both. In CI a missing one is a failure.
pub fn python() -> Option<PathBuf> {
    let mut cands: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("BLOSCFS_PYTHON") {
        cands.push(p.into());
    }
    cands.push(root().join(".venv/bin/python"));
    cands.push("python3".into());
    let found = cands.into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import numpy, blosc2"])
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs a python with numpy and blosc2 (scripts/setup.sh, or set BLOSCFS_PYTHON)"
        );
        eprintln!("SKIPPING numpy checks: no python with numpy and blosc2 (set BLOSCFS_PYTHON)");
    }
    found
}

/// The device (maj:min) of the topmost mount at `mp`, if any.
pub fn mount_dev(mp: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    bloscfs::mount_table::parse_mountinfo(&info)
        .into_iter()
        .rev()
        .find(|(p, _, _)| p == mp)
        .map(|(_, _, dev)| dev)
}

pub fn is_mounted(mp: &Path) -> bool {
    mount_dev(mp).is_some()
}

/// Is `mp` mounted and answering? A mount is listed in /proc/mounts before
/// its daemon has answered FUSE_INIT (the connection's limits unset); a
/// stat through it waits for that answer.
pub fn mount_answers(mp: &Path) -> bool {
    is_mounted(mp) && std::fs::metadata(mp).is_ok()
}

/// Wait (at most 15 s, else fail) until `cond` holds.
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

/// `fusermount3 -u`, retried for up to 5 s: it can fail with "Device or
/// resource busy" for a moment after the last read (seen once in a loaded CI
/// run, where the test then waited forever for a daemon still mounted).
/// Done once `mp` is no longer mounted; else why the last try failed.
pub fn try_unmount(mp: &Path) -> Result<(), String> {
    let mut why = String::new();
    for _ in 0..50 {
        match Command::new("fusermount3").arg("-u").arg(mp).output() {
            Ok(o) if o.status.success() => return Ok(()),
            Ok(o) => why = String::from_utf8_lossy(&o.stderr).into_owned(),
            Err(e) => why = e.to_string(),
        }
        if !is_mounted(mp) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(why)
}

/// A source directory `dir/src` of a few fixtures (a frame, an array and a
/// plain file); returns its path.
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
