//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn fixture(rel: &str) -> PathBuf {
    fixtures().join(rel)
}

/// Copy a file or directory tree.
pub fn copy(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            copy(&e.path(), &to.join(e.file_name()));
        }
    } else {
        std::fs::copy(from, to).unwrap();
    }
}

/// The entry of the list `list` in the JSON manifest at `manifest` whose
/// `path` is `rel`.
pub fn manifest_entry(manifest: &Path, list: &str, rel: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(manifest).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == rel)
        .unwrap_or_else(|| panic!("{rel} not in the manifest"))
        .clone()
}

/// The reference bytes of a fixture: its whole content as read through the
/// library, checked against the manifest's SHA-256 (the reference library's).
pub fn reference_bytes(rel: &str) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let f = manifest_entry(&fixtures().join("manifest.json"), "fixtures", rel);
    let c = blosc_decode::open_path(&fixture(rel)).unwrap().unwrap();
    let mut buf = vec![0u8; c.len() as usize];
    assert_eq!(c.read_at(0, &mut buf).unwrap(), buf.len());
    assert_eq!(
        format!("{:x}", Sha256::digest(&buf)),
        f["sha256"].as_str().unwrap(),
        "{rel}"
    );
    buf
}

/// `blocks-lz4.b2frame` with 64 bytes in the middle of chunk 1's streams
/// flipped, written to `dir/damaged.b2frame`; returns its path.
pub fn damaged_copy(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("damaged.b2frame");
    let mut bytes = std::fs::read(fixture("frame/blocks-lz4.b2frame")).unwrap();
    let good = blosc_decode::open_path(&fixture("frame/blocks-lz4.b2frame"))
        .unwrap()
        .unwrap();
    let bad_at = match good.chunks()[1].loc {
        blosc_decode::index::ChunkLoc::Stored { offset, .. } => offset as usize + 3000,
        _ => unreachable!(),
    };
    for b in &mut bytes[bad_at..bad_at + 64] {
        *b ^= 0x5a;
    }
    std::fs::write(&p, &bytes).unwrap();
    p
}

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
    cands.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
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
    bloscfs::mounts::parse_mountinfo(&info)
        .into_iter()
        .rev()
        .find(|(p, _, _)| p == mp)
        .map(|(_, _, dev)| dev)
}

pub fn is_mounted(mp: &Path) -> bool {
    mount_dev(mp).is_some()
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
