//! Source trees deeper than PATH_MAX: a 100-level tree of 60-character
//! directory names (over 6100 bytes of path) is presented to its bottom.
//! Its entries are found, listed, stat'ed, read and decoded there as at the
//! top: without a mount (`Fs`), and through a real mount walked level by
//! level with relative paths, as `cd a; cd b; ...` does. A real mount needs
//! /dev/fuse and fusermount3: in CI (CI set) their absence fails the test;
//! elsewhere it is skipped with a message.

use crate::common;
use bloscfs::fs::{Fs, FsOptions, Kind, ROOT_INO};
use common::*;
use sha2::{Digest, Sha256};
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const LEVELS: usize = 100;
const PLAIN: &[u8] = b"plain bytes at the bottom of a deep tree\n";
/// A contiguous frame python-blosc2 wrote (`manifest.json` holds the
/// SHA-256 of what python-blosc2 decodes from it).
const FRAME: &str = "frame/blocks-lz4.b2frame";
/// A sparse frame python-blosc2 4.14.1 wrote (a directory of chunk files).
const SPARSE: &str = "writers/sizes/4.14.1/several-s.b2frame";

/// The name of level `i`: 60 characters.
fn level(i: usize) -> String {
    format!("{i:03}-{}", "d".repeat(56))
}

fn c(name: &str) -> CString {
    CString::new(name).unwrap()
}

/// `openat(dir, name, flags)`, as an owned descriptor.
fn open_at(dir: &OwnedFd, name: &str, flags: libc::c_int, mode: libc::c_uint) -> OwnedFd {
    // SAFETY: a valid descriptor and NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c(name).as_ptr(),
            flags | libc::O_CLOEXEC,
            mode,
        )
    };
    assert!(fd >= 0, "{name}: {}", std::io::Error::last_os_error());
    // SAFETY: just opened, owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// `mkdirat(dir, name)` and the new directory opened.
fn mkdir_at(dir: &OwnedFd, name: &str) -> OwnedFd {
    // SAFETY: a valid descriptor and NUL-terminated name.
    let r = unsafe { libc::mkdirat(dir.as_raw_fd(), c(name).as_ptr(), 0o755) };
    assert_eq!(r, 0, "{name}: {}", std::io::Error::last_os_error());
    open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0)
}

fn write_at(dir: &OwnedFd, name: &str, bytes: &[u8]) {
    let fd = open_at(
        dir,
        name,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        0o644,
    );
    File::from(fd).write_all(bytes).unwrap();
}

/// Build the deep tree in `top` (the full path is too long for `mkdir -p`:
/// made one level at a time, relative to the level above). At the bottom:
/// a plain file, a contiguous frame, a sparse frame and a link to the frame.
fn deep_tree(top: &Path) {
    let mut dir = OwnedFd::from(File::open(top).unwrap());
    for i in 0..LEVELS {
        dir = mkdir_at(&dir, &level(i));
    }
    write_at(&dir, "notes.txt", PLAIN);
    write_at(
        &dir,
        "series.b2frame",
        &std::fs::read(fixture(FRAME)).unwrap(),
    );
    let sparse = mkdir_at(&dir, "several.b2frame");
    for e in std::fs::read_dir(fixture(SPARSE)).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        write_at(&sparse, &name, &std::fs::read(e.path()).unwrap());
    }
    // SAFETY: a valid descriptor and NUL-terminated names.
    let r = unsafe {
        libc::symlinkat(
            c("series.b2frame").as_ptr(),
            dir.as_raw_fd(),
            c("link").as_ptr(),
        )
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    let deep = top.as_os_str().len() + LEVELS * 61;
    assert!(deep > 6000, "{deep} bytes");
}

/// The sparse frame's content as python-blosc2 decodes it: its SHA-256.
fn sparse_sha256() -> String {
    let m = fixture("writers/sizes/4.14.1/manifest.json");
    manifest_entry(&m, "files", "several-s.b2frame")["sha256"]
        .as_str()
        .unwrap()
        .to_string()
}

fn sha256(b: &[u8]) -> String {
    format!("{:x}", Sha256::digest(b))
}

/// All of `ino`'s bytes, read through `fs` in 64 KiB requests.
fn read_all(fs: &Fs, ino: u64) -> Vec<u8> {
    let (fh, _) = fs.open(ino, false).unwrap();
    let mut out = Vec::new();
    loop {
        let got = fs.read(fh, out.len() as u64, 1 << 16).unwrap();
        if got.is_empty() {
            break;
        }
        out.extend_from_slice(&got);
    }
    fs.release(fh);
    out
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn entries_below_path_max_are_found_listed_and_read() {
    let d = tempfile::tempdir().unwrap();
    deep_tree(d.path());
    let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
    let mut ino = ROOT_INO;
    for i in 0..LEVELS {
        let name = level(i);
        assert!(names(&fs, ino).contains(&name), "level {i} not listed");
        let a = fs
            .lookup(ino, OsStr::new(&name))
            .unwrap_or_else(|e| panic!("level {i}: {e}"));
        assert_eq!(a.kind, Kind::Dir, "level {i}");
        assert_eq!(fs.getattr(a.ino).unwrap().ino, a.ino, "level {i}");
        ino = a.ino;
    }
    assert_eq!(
        names(&fs, ino),
        [".", "..", "link", "notes.txt", "series", "several"]
    );
    let look = |n: &str| fs.lookup(ino, OsStr::new(n)).unwrap();

    let plain = look("notes.txt");
    assert_eq!((plain.kind, plain.size), (Kind::File, PLAIN.len() as u64));
    assert_eq!(read_all(&fs, plain.ino), PLAIN);

    let want = reference_bytes(FRAME);
    let frame = look("series");
    assert_eq!((frame.kind, frame.size), (Kind::File, want.len() as u64));
    assert!(read_all(&fs, frame.ino) == want, "frame bytes differ");
    let format = fs.getxattr(frame.ino, OsStr::new("user.blosc.format"));
    assert!(format.is_ok(), "{format:?}");

    let sparse = look("several");
    assert_eq!(sparse.kind, Kind::File);
    assert_ne!(sparse.perm & 0o444, 0, "the sparse frame is readable");
    let got = read_all(&fs, sparse.ino);
    assert_eq!(got.len() as u64, sparse.size);
    assert_eq!(sha256(&got), sparse_sha256());

    let link = look("link");
    assert_eq!(link.kind, Kind::Symlink);
    assert_eq!(fs.readlink(link.ino).unwrap(), b"series");
    assert_eq!(link.size, 6);

    // Nothing is left open by paths resolved in pieces.
    let before = open_fds();
    for _ in 0..200 {
        fs.getattr(sparse.ino).unwrap();
        fs.getattr(plain.ino).unwrap();
        fs.readlink(link.ino).unwrap();
        read_all(&fs, plain.ino);
    }
    let grown = open_fds().saturating_sub(before);
    assert!(grown < 50, "{grown} more descriptors after 200 rounds");
}

/// The daemon serving `src` at `mp` in the foreground, its log in `log`;
/// unmounted and stopped when dropped.
struct Mounted {
    mp: std::path::PathBuf,
    child: Child,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if try_unmount(&self.mp).is_err() {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.mp)
                .status();
        }
        let t = std::time::Instant::now();
        while self.child.try_wait().ok().flatten().is_none()
            && t.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// In the mount `mp`, walk down every level with `cd -P NAME` (after `ls`
/// listed NAME), `stat`ing each level, then run `cmd` at the bottom. (`-P`:
/// a plain `cd` asks the kernel for the whole logical path, which fails past
/// PATH_MAX on any file system.)
fn at_bottom(mp: &Path, cmd: &str) -> std::process::Output {
    let names: Vec<String> = (0..LEVELS).map(level).collect();
    let script = format!(
        "set -e\ncd \"$1\"\nfor d in {}; do\n  ls -1 | grep -qx \"$d\" || {{ echo \"$d not listed\" >&2; exit 1; }}\n  stat -c %F \"$d\" | grep -qx directory\n  cd -P \"$d\"\ndone\n{cmd}\n",
        names.join(" ")
    );
    let o = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("sh")
        .arg(mp)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

#[test]
fn a_mount_is_walked_to_the_bottom_of_a_deep_tree() {
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (src, mp) = (d.path().join("src"), d.path().join("mnt"));
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir(&mp).unwrap();
    deep_tree(&src);
    let log = d.path().join("log");
    let child = Command::new(bin())
        .arg("-f")
        .arg(&src)
        .arg(&mp)
        .stderr(Stdio::from(File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    let m = Mounted {
        mp: mp.clone(),
        child,
    };
    wait_for(|| mount_answers(&mp), "the mount");

    let ls = at_bottom(&mp, "ls -1");
    assert_eq!(
        String::from_utf8_lossy(&ls.stdout),
        "link\nnotes.txt\nseries\nseveral\n"
    );
    let want = reference_bytes(FRAME);
    assert_eq!(at_bottom(&mp, "cat notes.txt").stdout, PLAIN);
    assert!(
        at_bottom(&mp, "cat series").stdout == want,
        "frame bytes differ"
    );
    assert!(
        at_bottom(&mp, "cat link").stdout == want,
        "link bytes differ"
    );
    let sparse = at_bottom(&mp, "cat several").stdout;
    assert_eq!(sha256(&sparse), sparse_sha256());
    let st = at_bottom(&mp, "stat -c '%n %s %F' notes.txt series several");
    assert_eq!(
        String::from_utf8_lossy(&st.stdout),
        format!(
            "notes.txt {} regular file\nseries {} regular file\nseveral {} regular file\n",
            PLAIN.len(),
            want.len(),
            sparse.len()
        )
    );
    drop(m);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("panicked"), "{text}");
}

/// Out of descriptors, a deep entry fails with `EMFILE` (as a short one
/// does: the daemon then closes idle containers and retries), never as
/// missing; one free descriptor is enough to stat it (the pieces are held
/// one at a time) and two to open it. Run in a child process of this test
/// binary, where the descriptor limit is lowered and filled.
#[test]
fn out_of_descriptors_a_deep_entry_is_emfile_not_missing() {
    const CHILD: &str = "BLOSCFS_LONGPATH_EMFILE_TREE";
    if let Some(top) = std::env::var_os(CHILD) {
        return emfile_child(Path::new(&top));
    }
    let d = tempfile::tempdir().unwrap();
    deep_tree(d.path());
    let o = Command::new(std::env::current_exe().unwrap())
        .args([
            "out_of_descriptors_a_deep_entry_is_emfile_not_missing",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD, d.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("1 passed"),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn emfile_child(top: &Path) {
    let fs = Fs::new(top, &FsOptions::default()).unwrap();
    let mut ino = ROOT_INO;
    for i in 0..LEVELS {
        ino = fs.lookup(ino, OsStr::new(&level(i))).unwrap().ino;
    }
    let plain = fs.lookup(ino, OsStr::new("notes.txt")).unwrap().ino;
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointers; lowering the soft limit of this process
    // (a child running this one test) only.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        r.rlim_cur = r.rlim_cur.min(256);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0);
    }
    let mut fill = Vec::new();
    loop {
        // SAFETY: dup of standard input; the copy is owned by `fill`.
        let fd = unsafe { libc::dup(0) };
        if fd < 0 {
            break;
        }
        // SAFETY: just made, owned by nobody else.
        fill.push(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    assert_eq!(fs.getattr(plain).map_err(|e| e.errno()), Err(libc::EMFILE));
    assert_eq!(fs.readlink(plain).map_err(|e| e.errno()), Err(libc::EMFILE));
    fill.pop();
    assert_eq!(fs.getattr(plain).unwrap().size, PLAIN.len() as u64);
    assert_eq!(fs.open(plain, false).unwrap_err(), libc::EMFILE);
    fill.pop();
    let (fh, _) = fs.open(plain, false).unwrap();
    assert_eq!(fs.read(fh, 0, 4096).unwrap(), PLAIN);
}
