//! Real mounts, read with unmodified tools. Needs /dev/fuse and fusermount3:
//! in CI (CI set) their absence fails the tests; elsewhere they are skipped
//! with a message.

use crate::common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A xorshift generator: tests need repeatable, not good, randomness.
fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

pub(crate) struct Mount {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) child: Option<Child>,
}

impl Mount {
    pub(crate) fn src(&self) -> PathBuf {
        self.dir.path().join("src")
    }
    pub(crate) fn mp(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
    /// Mount in the foreground (`-f`) as a child process.
    pub(crate) fn foreground(extra: &[&str]) -> Mount {
        Mount::prepare().mount_foreground(extra)
    }
    /// Mount a prepared tree in the foreground (`-f`) as a child process.
    pub(crate) fn mount_foreground(self, extra: &[&str]) -> Mount {
        self.spawn(extra, Stdio::inherit())
    }
    /// Mount a prepared tree in the foreground, its log in a file: the
    /// mount and that file's path.
    pub(crate) fn mount_logged(self, extra: &[&str]) -> (Mount, PathBuf) {
        let log = self.dir.path().join("log");
        let m = self.spawn(extra, std::fs::File::create(&log).unwrap().into());
        (m, log)
    }
    fn spawn(mut self, extra: &[&str], stderr: Stdio) -> Mount {
        let child = Command::new(bin())
            .arg("-f")
            .args(extra)
            .arg(self.src())
            .arg(self.mp())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mp = self.mp();
        self.child = Some(child);
        wait_for(|| mount_answers(&mp), "the mount");
        self
    }
    /// Unmount, and check the daemon's log (`mount_logged`) shows no panic.
    pub(crate) fn unmount_without_panic(&mut self, log: &Path) {
        self.unmount();
        let text = std::fs::read_to_string(log).unwrap();
        assert!(!text.contains("panicked"), "{text}");
    }
    pub(crate) fn prepare() -> Mount {
        let dir = tempfile::tempdir().unwrap();
        let src = source_with_fixtures(dir.path());
        std::fs::create_dir_all(dir.path().join("mnt")).unwrap();
        copy(
            &fixture("frame/blocks-delta.b2frame"),
            &src.join("delta.b2"),
        );
        copy(
            &fixture("bloscpack/ndarray-1.blp"),
            &src.join("fortran.blp"),
        );
        copy(
            &fixture("frame/special-zero.b2frame"),
            &src.join("zeros.b2frame"),
        );
        copy(&fixture("b2nd"), &src.join("arrays"));
        Mount { dir, child: None }
    }
    /// Unmount as a user would, and wait (bounded) for the daemon to exit:
    /// a daemon that does not exit is killed and the test fails instead of
    /// hanging.
    pub(crate) fn unmount(&mut self) {
        let mp = self.mp();
        if let Err(why) = try_unmount(&mp) {
            eprintln!(
                "fusermount3 -u {} kept failing ({why}): unmounting lazily",
                mp.display()
            );
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&mp)
                .status();
        }
        if let Some(mut c) = self.child.take() {
            let t = std::time::Instant::now();
            loop {
                match c.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if t.elapsed() < Duration::from_secs(20) => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    _ => {
                        let _ = c.kill();
                        let _ = c.wait();
                        panic!(
                            "the daemon did not exit within 20 s of unmounting {}",
                            mp.display()
                        );
                    }
                }
            }
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if is_mounted(&self.mp()) {
            let _ = Command::new("fusermount3")
                .arg("-u")
                .arg("-z")
                .arg(self.mp())
                .status();
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub(crate) fn sh(cmd: &str) -> std::process::Output {
    Command::new("sh").arg("-c").arg(cmd).output().unwrap()
}

#[test]
fn unmodified_tools_read_exact_bytes() {
    if !fuse_available() {
        return;
    }
    let mut m = Mount::foreground(&["-o", "cache_size=4M,xattr"]);
    let mp = m.mp();
    let mut names: Vec<String> = std::fs::read_dir(&mp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "arrays",
            "delta",
            "fortran.npy",
            "grid.npy",
            "notes.txt",
            "series",
            "zeros"
        ]
    );
    // cat + cmp against the reference bytes.
    let reference = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        reference.path(),
        reference_bytes("frame/blocks-lz4.b2frame"),
    )
    .unwrap();
    let o = sh(&format!(
        "cat {}/series | cmp - {}",
        mp.display(),
        reference.path().display()
    ));
    assert!(
        o.status.success(),
        "cmp: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    // dd with skip= reads a window.
    let o = sh(&format!(
        "dd if={}/series bs=4096 skip=300 count=2 status=none",
        mp.display()
    ));
    assert_eq!(
        o.stdout,
        reference_bytes("frame/blocks-lz4.b2frame")[300 * 4096..302 * 4096]
    );
    let o = sh(&format!("cat {}/delta", mp.display()));
    assert_eq!(o.stdout, reference_bytes("frame/blocks-delta.b2frame"));
    // Holes are answered from the daemon's zero buffer.
    let o = sh(&format!("cat {}/zeros", mp.display()));
    let zeros = reference_bytes("frame/special-zero.b2frame");
    assert!(zeros.iter().all(|&b| b == 0) && !zeros.is_empty());
    assert_eq!(o.stdout, zeros);
    assert_eq!(
        std::fs::read(mp.join("notes.txt")).unwrap(),
        b"plain text\n"
    );
    // stat size and du
    let md = std::fs::metadata(mp.join("series")).unwrap();
    assert_eq!(
        md.len(),
        reference_bytes("frame/blocks-lz4.b2frame").len() as u64
    );
    let o = sh(&format!("du -k {}/series", mp.display()));
    let du: u64 = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        du * 1024 < md.len() / 8,
        "du shows the compressed size ({du} KiB), not {}",
        md.len()
    );
    // Writes are refused.
    assert!(std::fs::OpenOptions::new()
        .write(true)
        .open(mp.join("series"))
        .is_err());
    assert!(std::fs::write(mp.join("new"), b"x").is_err());
    // Reading the same file again is served the same (kernel cache kept).
    let o = sh(&format!(
        "cat {}/series | cmp - {}",
        mp.display(),
        reference.path().display()
    ));
    assert!(o.status.success());
    // Extended attributes through getfattr.
    let o = sh(&format!(
        "getfattr -d --absolute-names {}/series",
        mp.display()
    ));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("user.blosc.codec=\"lz4\"") && s.contains("user.blosc.nchunks=\"4\""),
        "{s}"
    );
    let o = sh(&format!(
        "getfattr -n user.bloscfs.stats --only-values --absolute-names {}",
        mp.display()
    ));
    assert!(String::from_utf8_lossy(&o.stdout).contains("blocks_decoded="));
    m.unmount();
    assert!(!is_mounted(&mp));
}

#[test]
fn numpy_opens_the_arrays() {
    if !fuse_available() {
        return;
    }
    let Some(py) = python() else { return };
    let m = Mount::prepare();
    // Containers made by python-blosc2 right here, ZSTD and LZ4.
    let make = format!(
        "import numpy as np, blosc2\n\
         a = np.arange(3_000_000, dtype='<i8') * 3\n\
         for name, codec in (('made-zstd.b2frame', blosc2.Codec.ZSTD), ('made-lz4.bl2', blosc2.Codec.LZ4)):\n\
         \x20   s = blosc2.SChunk(chunksize=1 << 20, data=a, cparams={{'codec': codec, 'typesize': 8}})\n\
         \x20   open('{src}/' + name, 'wb').write(s.to_cframe())\n",
        src = m.src().display()
    );
    let o = Command::new(&py).arg("-c").arg(make).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = m.mount_foreground(&[]);
    let mp = m.mp();
    let script = format!(
        "import numpy as np, blosc2\n\
         a = np.load('{mp}/grid.npy', mmap_mode='r')\n\
         ref = blosc2.open('{src}/grid.b2nd')\n\
         assert a.shape == (97, 131) and a.dtype == ref.dtype\n\
         assert (a[45, :] == ref[45, :]).all() and (a[:, 7] == ref[:, 7]).all()\n\
         assert (np.load('{mp}/grid.npy') == ref[...]).all()\n\
         f = np.load('{mp}/fortran.npy', mmap_mode='r')\n\
         assert f.flags['F_CONTIGUOUS'] and f.shape == (200, 300)\n\
         assert (f == (np.arange(60000, dtype='<i4') % 977).reshape(200, 300)).all()\n\
         s = np.fromfile('{mp}/series', dtype='<i8')\n\
         assert (s == np.arange(len(s)) // 7).all()\n\
         for n in ('made-zstd', 'made-lz4'):\n\
         \x20   x = np.fromfile('{mp}/' + n, dtype='<i8')\n\
         \x20   assert (x == np.arange(3_000_000, dtype='<i8') * 3).all(), n\n\
         \x20   y = np.fromfile('{mp}/' + n, dtype='<i8', count=1000, offset=8 * 2_000_000)\n\
         \x20   assert (y == (np.arange(2_000_000, 2_001_000) * 3)).all(), n\n\
         print('ok')\n",
        mp = mp.display(),
        src = m.src().display()
    );
    let o = Command::new(&py).arg("-c").arg(script).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Every b2nd fixture (0-8 dims, all dtypes): whole, mmap, random N-d slices.
    let check = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/numpy_check.py");
    let o = Command::new(&py)
        .arg(check)
        .arg(&mp)
        .arg(m.src())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn holes_symlinks_sparse_frames_and_erofs() {
    if !fuse_available() {
        return;
    }
    let m = Mount::prepare();
    std::os::unix::fs::symlink("notes.txt", m.src().join("link")).unwrap();
    let sparse = std::fs::read_dir(fixture("frame"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .expect("a sparse frame fixture");
    copy(&sparse, &m.src().join("many.b2frame"));
    std::os::unix::fs::symlink("many.b2frame", m.src().join("tomany")).unwrap();
    std::fs::create_dir(m.src().join("dir")).unwrap();
    std::fs::write(m.src().join("dir/inner.txt"), b"in").unwrap();
    let m = m.mount_foreground(&[]);
    let mp = m.mp();
    // A symlink stays a symlink.
    assert_eq!(
        std::fs::read_link(mp.join("link")).unwrap(),
        Path::new("notes.txt")
    );
    assert_eq!(std::fs::read(mp.join("link")).unwrap(), b"plain text\n");
    // A link to a container points at its presented name, and resolves.
    assert_eq!(
        std::fs::read_link(mp.join("tomany")).unwrap(),
        Path::new("many")
    );
    assert!(std::fs::metadata(mp.join("tomany")).unwrap().is_file());
    assert_eq!(std::fs::read(mp.join("dir/inner.txt")).unwrap(), b"in");
    // A sparse frame directory is one regular file with the library's bytes.
    let md = std::fs::metadata(mp.join("many")).unwrap();
    assert!(md.is_file());
    let c = blosc_decode::open_path(&m.src().join("many.b2frame"))
        .unwrap()
        .unwrap();
    let mut want = vec![0u8; c.len() as usize];
    c.read_at(0, &mut want).unwrap();
    assert_eq!(std::fs::read(mp.join("many")).unwrap(), want);
    // SEEK_HOLE / SEEK_DATA through the kernel.
    let o = sh(&format!(
        "python3 -c \"import os; fd = os.open('{}/zeros', os.O_RDONLY); print(os.lseek(fd, 0, os.SEEK_HOLE)); print(os.fstat(fd).st_size)\"",
        mp.display()
    ));
    let out = String::from_utf8_lossy(&o.stdout);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("0"), "{out}");
    // Writes: EROFS, not just any error.
    let e = std::fs::OpenOptions::new()
        .write(true)
        .open(mp.join("series"))
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));
    let e = std::fs::write(mp.join("new"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));
    let e = std::fs::remove_file(mp.join("notes.txt")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));
}

#[test]
fn daemon_with_auto_unmount_returns_once_mounted() {
    if !fuse_available() {
        return;
    }
    let m = Mount::prepare();
    let t = Instant::now();
    let st = Command::new(bin())
        .args(["-o", "auto_unmount"])
        .arg(m.src())
        .arg(m.mp())
        .status()
        .unwrap();
    assert!(st.success());
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "the parent waited {:?}",
        t.elapsed()
    );
    assert!(is_mounted(&m.mp()));
    assert_eq!(
        std::fs::read(m.mp().join("notes.txt")).unwrap(),
        b"plain text\n"
    );
    try_unmount(&m.mp()).unwrap();
    let mp = m.mp();
    wait_for(|| !is_mounted(&mp), "the unmount");
}

#[test]
fn daemon_mode_sigterm_and_double_mount() {
    if !fuse_available() {
        return;
    }
    let m = Mount::prepare();
    let st = Command::new(bin())
        .arg(m.src())
        .arg(m.mp())
        .status()
        .unwrap();
    assert!(st.success());
    assert!(is_mounted(&m.mp()), "mounted when the command returns");
    // A second mount on the same mountpoint: a clear error.
    let o = Command::new(bin())
        .arg(m.src())
        .arg(m.mp())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("already a mount point"));
    // SIGTERM to the daemon unmounts cleanly.
    let o = sh(&format!(
        "pgrep -f 'bloscfs {} {}'",
        m.src().display(),
        m.mp().display()
    ));
    let pid = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .expect("daemon pid")
        .to_string();
    sh(&format!("kill -TERM {pid}"));
    let mp = m.mp();
    wait_for(|| !is_mounted(&mp), "the unmount after SIGTERM");
    // No stale "Transport endpoint is not connected".
    assert!(std::fs::read_dir(&mp).is_ok());
}

#[test]
fn sigint_in_the_foreground_unmounts() {
    if !fuse_available() {
        return;
    }
    let mut m = Mount::foreground(&[]);
    let pid = m.child.as_ref().unwrap().id();
    // Keep reading while the signal arrives.
    let mp = m.mp();
    let reader = std::thread::spawn(move || {
        for _ in 0..50 {
            let _ = std::fs::read(mp.join("series"));
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    sh(&format!("kill -INT {pid}"));
    let st = m.child.take().unwrap().wait().unwrap();
    assert!(st.success(), "exit status {st:?}");
    assert!(!is_mounted(&m.mp()));
    reader.join().unwrap();
}

/// pid of the daemon serving `mp`.
fn daemon_pid(mp: &Path) -> String {
    let o = sh(&format!("pgrep -f 'bloscfs.*{}'", mp.display()));
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .expect("daemon pid")
        .to_string()
}

fn assert_daemon_is_under_test(mp: &Path) {
    let pid = daemon_pid(mp);
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/exe")).unwrap(),
        std::fs::canonicalize(bin()).unwrap(),
        "the daemon is the binary under test, not some installed bloscfs"
    );
}

#[test]
fn mount_fuse3_helper_passes_fstab_options() {
    if !fuse_available() {
        return;
    }
    let m = Mount::prepare();
    // mount.fuse3 (what mount(8) runs for fuse.* types) runs `bloscfs` from
    // PATH: a directory holding a link to the binary under test goes first.
    let path = path_with_bin(m.dir.path());
    // Options as an fstab line gives them; mount.fuse3 adds dev,suid.
    let o = Command::new("mount.fuse3")
        .arg(m.src())
        .arg(m.mp())
        .args(["-t", "bloscfs"])
        .args([
            "-o",
            "ro,noatime,noauto,user,_netdev,nofail,x-systemd.automount,cache_size=8M,threads=3",
        ])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "mount.fuse3: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(is_mounted(&m.mp()));
    assert_daemon_is_under_test(&m.mp());
    assert_eq!(
        std::fs::read(m.mp().join("notes.txt")).unwrap(),
        b"plain text\n"
    );
    let o = Command::new("umount").arg(m.mp()).output().unwrap();
    assert!(
        o.status.success(),
        "umount: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mp = m.mp();
    wait_for(|| !is_mounted(&mp), "umount");
}

#[test]
fn mount_t_fuse_bloscfs() {
    if !fuse_available() {
        return;
    }
    let m = Mount::prepare();
    // mount(8) runs helpers with root's default PATH, whatever ours is, so
    // the binary under test is linked as /usr/local/sbin/bloscfs (searched
    // before /usr/local/bin) for the duration of the test. A real file there
    // is never replaced.
    let link = Path::new("/usr/local/sbin/bloscfs");
    let previous = std::fs::read_link(link).ok();
    if link.symlink_metadata().is_ok() && previous.is_none() {
        eprintln!(
            "SKIPPING mount -t: {} is a real file, not replaced",
            link.display()
        );
        return;
    }
    let _ = std::fs::remove_file(link);
    if let Err(e) = std::os::unix::fs::symlink(bin(), link) {
        assert!(
            std::env::var_os("CI").is_none(),
            "cannot link {}: {e}",
            link.display()
        );
        eprintln!("SKIPPING mount -t: cannot link {}: {e}", link.display());
        return;
    }
    struct Restore(Option<PathBuf>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let link = Path::new("/usr/local/sbin/bloscfs");
            let _ = std::fs::remove_file(link);
            if let Some(p) = &self.0 {
                let _ = std::os::unix::fs::symlink(p, link);
            }
        }
    }
    let _restore = Restore(previous);
    let o = Command::new("mount")
        .args(["-t", "fuse.bloscfs"])
        .arg(m.src())
        .arg(m.mp())
        .args(["-o", "ro,noatime,cache_size=8M"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "mount: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(is_mounted(&m.mp()));
    assert_daemon_is_under_test(&m.mp());
    assert_eq!(
        std::fs::read(m.mp().join("notes.txt")).unwrap(),
        b"plain text\n"
    );
    let o = Command::new("umount").arg(m.mp()).output().unwrap();
    assert!(
        o.status.success(),
        "umount: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mp = m.mp();
    wait_for(|| !is_mounted(&mp), "umount");
}

#[test]
fn unknown_option_is_a_clear_error() {
    let m = Mount::prepare();
    let o = Command::new(bin())
        .args(["-o", "bogus=1"])
        .arg(m.src())
        .arg(m.mp())
        .output()
        .unwrap();
    assert!(!o.status.success());
    // Named, but never with its value (which may be a secret).
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("unknown option 'bogus'") && !e.contains("=1"),
        "{e}"
    );
}

#[test]
fn damaged_chunk_is_eio_for_that_range_only_and_logged_once() {
    if !fuse_available() {
        return;
    }
    let m = Mount::prepare();
    damaged_copy(&m.src());
    let (mut m, log) = m.mount_logged(&[]);
    let mp = m.mp();
    let whole = reference_bytes("frame/blocks-lz4.b2frame");
    for _ in 0..3 {
        // Direct I/O, so every attempt reaches the daemon.
        let o = sh(&format!(
            "dd if={}/damaged bs=1M skip=1 count=1 iflag=direct status=none",
            mp.display()
        ));
        assert!(!o.status.success());
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("Input/output error"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Chunks 0 and 2 are served; so is every other file.
    let o = sh(&format!(
        "dd if={}/damaged bs=1M skip=2 count=1 status=none",
        mp.display()
    ));
    assert_eq!(o.stdout, whole[2 << 20..3 << 20]);
    let o = sh(&format!(
        "dd if={}/damaged bs=1M count=1 status=none",
        mp.display()
    ));
    assert_eq!(o.stdout, whole[..1 << 20]);
    assert_eq!(
        std::fs::read(mp.join("series")).unwrap(),
        whole,
        "the daemon keeps serving"
    );
    m.unmount();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("damaged.b2frame"))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "one log line for repeated failures:\n{text}"
    );
    assert!(lines[0].contains("chunk 1"), "{}", lines[0]);
}

/// Small random reads through the kernel (read-ahead off, so each is one
/// 4 KiB request): each is answered before its block is cached (`Deferred`),
/// and reading the same places again (from the cache the replies left
/// behind, the page cache dropped) gives the same bytes.
#[test]
fn small_random_reads_then_cached_blocks_are_exact() {
    if !fuse_available() {
        return;
    }
    use std::os::unix::fs::FileExt;
    use std::os::unix::io::AsRawFd;
    let mut m = Mount::foreground(&[]);
    let whole = reference_bytes("frame/blocks-lz4.b2frame");
    let f = std::fs::File::open(m.mp().join("series")).unwrap();
    let mut rand = xorshift(0x2545_F491_4F6C_DD1D);
    let offs: Vec<u64> = (0..200)
        .map(|_| rand() % (whole.len() as u64 - 4096) / 4096 * 4096)
        .collect();
    for pass in 0..2 {
        // SAFETY: a valid descriptor; advice only.
        unsafe {
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
        }
        for &o in &offs {
            let mut buf = [0u8; 4096];
            f.read_exact_at(&mut buf, o).unwrap();
            assert_eq!(
                buf[..],
                whole[o as usize..o as usize + 4096],
                "pass {pass}, offset {o}"
            );
        }
    }
    drop(f);
    m.unmount();
}

/// With `-o source_io=direct` (every block read bypassing the page cache)
/// the mount serves exact bytes, also through a small cache.
#[test]
fn direct_source_io_serves_exact_bytes() {
    if !fuse_available() {
        return;
    }
    let mut m = Mount::foreground(&["-o", "source_io=direct,cache_size=1M"]);
    assert_eq!(
        std::fs::read(m.mp().join("series")).unwrap(),
        reference_bytes("frame/blocks-lz4.b2frame")
    );
    assert_eq!(
        std::fs::read(m.mp().join("delta")).unwrap(),
        reference_bytes("frame/blocks-delta.b2frame")
    );
    m.unmount();
}

/// Why `got`, read at `o`, matches none of `versions`: which versions each
/// page of it matches, how much of it is zeros, where its first bytes are
/// found.
fn mismatch(versions: &[Vec<u8>], o: usize, got: &[u8]) -> String {
    let n = got.len();
    let mut pages = Vec::new();
    let mut p = o;
    while p < o + n {
        let e = ((p / 4096 + 1) * 4096).min(o + n);
        let m: Vec<usize> = (0..versions.len())
            .filter(|&i| versions[i].get(p..e) == Some(&got[p - o..e - o]))
            .collect();
        pages.push(format!("{}:{m:?}", p / 4096));
        p = e;
    }
    let zeros = got.iter().filter(|&&b| b == 0).count();
    let head = &got[..n.min(32)];
    let elsewhere: Vec<Option<usize>> = versions
        .iter()
        .map(|v| v.windows(head.len()).position(|w| w == head))
        .collect();
    let lens: Vec<usize> = versions.iter().map(|v| v.len()).collect();
    format!(
        "a read of {n} bytes at {o} matches no version of the file; pages: {}; {zeros} zero bytes; its first bytes found in the versions at {elsewhere:?}; their lengths {lens:?}",
        pages.join(" ")
    )
}

/// Sources truncated, rewritten in place and replaced by rename while
/// readers read them through the mount, for a few seconds: every read
/// returns bytes of one version (either frame's content, or the raw bytes of
/// a file cut inside its header, served as a plain file), or fails with
/// `EIO` (as opens of a frame cut in its chunks do); never bytes of two
/// versions in one read. The daemon lives on, serves the
/// final version exactly and unmounts cleanly, with no panic in its log.
#[test]
fn sources_changing_while_read_serve_one_version_per_read() {
    if !fuse_available() {
        return;
    }
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    let m = Mount::prepare();
    let (a_name, b_name) = ("frame/blocks-lz4.b2frame", "frame/lz4-none-ts4-c.b2frame");
    let a_file = std::fs::read(fixture(a_name)).unwrap();
    let b_file = std::fs::read(fixture(b_name)).unwrap();
    // What a read may return: either container's content, or the raw bytes
    // of either file (a frame cut inside its header is not seen as a
    // container and is served as a plain file).
    let versions: [Vec<u8>; 4] = [
        reference_bytes(a_name),
        reference_bytes(b_name),
        a_file.clone(),
        b_file.clone(),
    ];
    let target = m.src().join("live.b2frame");
    std::fs::write(&target, &a_file).unwrap();
    let (mut m, log) = m.mount_logged(&["-o", "cache_size=1M"]);
    let mp = m.mp();

    let stop = AtomicBool::new(false);
    let (served, failed, seen) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (mp, versions, stop) = (&mp, &versions, &stop);
            let (served, failed, seen) = (&served, &failed, &seen);
            s.spawn(move || {
                let mut rand = xorshift(0x9E37_79B9_7F4A_7C15 ^ t);
                while !stop.load(Relaxed) {
                    // The name is `live` while its header says "frame" and
                    // `live.b2frame` while it does not; a frame cut in its
                    // chunks fails to open.
                    let f = match std::fs::File::open(mp.join("live"))
                        .or_else(|_| std::fs::File::open(mp.join("live.b2frame")))
                    {
                        Ok(f) => f,
                        Err(e) => {
                            let code = e.raw_os_error();
                            assert!(
                                code == Some(libc::ENOENT) || code == Some(libc::EIO),
                                "open: {e}"
                            );
                            continue;
                        }
                    };
                    for _ in 0..16 {
                        let off = rand() % (4 << 20);
                        let mut buf = vec![0u8; 1 + (rand() % (256 << 10)) as usize];
                        match f.read_at(&mut buf, off) {
                            Ok(0) => {}
                            Ok(n) => {
                                let got = &buf[..n];
                                let o = off as usize;
                                let which =
                                    versions.iter().position(|v| v.get(o..o + n) == Some(got));
                                let Some(which) = which else {
                                    panic!("{}", mismatch(versions, o, got));
                                };
                                served.fetch_add(1, Relaxed);
                                seen.fetch_or(1 << which, Relaxed);
                            }
                            Err(e) => {
                                assert_eq!(e.raw_os_error(), Some(libc::EIO), "read at {off}: {e}");
                                failed.fetch_add(1, Relaxed);
                                break;
                            }
                        }
                    }
                }
            });
        }
        // The writer: replace by rename, cut in place, rewrite in place.
        let tmp = m.src().join(".tmp");
        let t0 = Instant::now();
        let mut round = 0u32;
        while t0.elapsed() < Duration::from_secs(4) {
            let (this, other) = if round.is_multiple_of(2) {
                (&b_file, &a_file)
            } else {
                (&a_file, &b_file)
            };
            std::fs::write(&tmp, this).unwrap();
            std::fs::rename(&tmp, &target).unwrap();
            std::thread::sleep(Duration::from_millis(40));
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&target)
                .unwrap();
            f.set_len(5000 + round as u64 * 997 % 40_000).unwrap();
            drop(f);
            std::thread::sleep(Duration::from_millis(40));
            std::fs::write(&target, other).unwrap();
            std::thread::sleep(Duration::from_millis(40));
            round += 1;
        }
        std::fs::write(&tmp, &a_file).unwrap();
        std::fs::rename(&tmp, &target).unwrap();
        stop.store(true, Relaxed);
    });
    let (served, failed, seen) = (served.into_inner(), failed.into_inner(), seen.into_inner());
    eprintln!("reads served {served}, failed {failed}, versions seen {seen:#b}");
    assert!(
        seen & 0b11 == 0b11,
        "both containers' contents were read ({seen:#b})"
    );
    // Once the names and attributes have expired, the last version is
    // served exactly.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(std::fs::read(mp.join("live")).unwrap(), versions[0]);
    assert_eq!(
        std::fs::read(mp.join("series")).unwrap(),
        reference_bytes("frame/blocks-lz4.b2frame"),
        "other files are served throughout"
    );
    m.unmount_without_panic(&log);
}

/// Files deleted, recreated and replaced by rename under their names while
/// readers open and read them by name through the mount, for a few seconds:
/// a read by a name returns that name's content or fails (`ENOENT`, `EIO`,
/// `ESTALE`), never another file's. Source inode numbers are reused at once
/// by the file system: with inode numbers taken from them alone, a name the
/// kernel still held led to whichever file had reused its number (15,190 of
/// 42,552 reads in a run of the same churn by hand).
#[test]
fn names_recreated_while_read_never_serve_another_file() {
    if !fuse_available() {
        return;
    }
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    let dir = tempfile::tempdir().unwrap();
    let (src, mp) = (dir.path().join("src"), dir.path().join("mnt"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&mp).unwrap();
    let (mut m, log) = Mount { dir, child: None }.mount_logged(&["-o", "xattr"]);
    let content = |name: &str, gen: u64| format!("{name}:{gen}:").repeat(50).into_bytes();
    let stop = AtomicBool::new(false);
    let (served, failed) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let (mp, stop, served, failed) = (&mp, &stop, &served, &failed);
            s.spawn(move || {
                let mut rand = xorshift(0x2545_F491_4F6C_DD1D ^ (t + 1));
                while !stop.load(Relaxed) {
                    let name = format!("f{}", rand() % 20);
                    if rand().is_multiple_of(5) {
                        let _ = std::fs::read_dir(mp).map(|d| d.count());
                    }
                    match std::fs::read(mp.join(&name)) {
                        Ok(data) => {
                            served.fetch_add(1, Relaxed);
                            let head = data.split(|&b| b == b':').next().unwrap_or(&[]);
                            assert!(
                                data.is_empty() || head == name.as_bytes(),
                                "reading {name} gave another file's content: {:?}",
                                String::from_utf8_lossy(&data[..data.len().min(40)])
                            );
                        }
                        Err(e) => {
                            let code = e.raw_os_error();
                            assert!(
                                [Some(libc::ENOENT), Some(libc::EIO), Some(libc::ESTALE)]
                                    .contains(&code),
                                "reading {name}: {e}"
                            );
                            failed.fetch_add(1, Relaxed);
                        }
                    }
                }
            });
        }
        // The writer: replace by rename, delete, rewrite in place.
        let mut rand = xorshift(0x9E37_79B9_7F4A_7C15);
        let t0 = Instant::now();
        let mut gen = 0;
        while t0.elapsed() < Duration::from_secs(4) {
            let seed = rand();
            gen += 1;
            let name = format!("f{}", seed % 20);
            let p = src.join(&name);
            let _ = match (seed >> 32) % 3 {
                0 => std::fs::write(src.join(".tmp"), content(&name, gen))
                    .and_then(|_| std::fs::rename(src.join(".tmp"), &p)),
                1 => std::fs::remove_file(&p),
                _ => std::fs::write(&p, content(&name, gen)),
            };
        }
        stop.store(true, Relaxed);
    });
    let (served, failed) = (served.into_inner(), failed.into_inner());
    eprintln!("reads served {served}, failed {failed}");
    assert!(served > 100, "too few reads were served ({served})");
    // Every file the churn made had an inode of its own: the daemon keeps
    // only those the kernel still holds. Once the kernel drops its cached
    // names and inodes (root only), it forgets them, and so does the daemon.
    let held = || -> u64 {
        let o = sh(&format!(
            "getfattr -n user.bloscfs.stats --only-values --absolute-names {}",
            mp.display()
        ));
        let s = String::from_utf8_lossy(&o.stdout).into_owned();
        s.lines()
            .find_map(|l| l.strip_prefix("inodes_held="))
            .unwrap_or_else(|| panic!("no inodes_held in {s}"))
            .parse()
            .unwrap()
    };
    let before = held();
    if std::fs::write("/proc/sys/vm/drop_caches", "2").is_ok() {
        wait_for(
            || held() <= 25,
            "the daemon to forget the inodes the kernel dropped",
        );
        eprintln!(
            "inodes held: {before} after the churn, {} once the kernel dropped its caches",
            held()
        );
    }
    m.unmount_without_panic(&log);
}

/// A sparse frame of more chunk files than the daemon may hold open (its
/// descriptor limit set to 600), written by python-blosc2: read whole
/// through the mount, twice, it is the reference library's bytes. Chunk
/// files were kept open once read, so past the limit every read failed with
/// "Too many open files".
#[test]
fn a_sparse_frame_of_more_chunk_files_than_descriptors_reads_whole() {
    if !fuse_available() {
        return;
    }
    let Some(py) = python() else { return };
    let m = Mount::prepare();
    let frame = m.src().join("many.b2frame");
    let want = m.dir.path().join("want.raw");
    let o = Command::new(&py)
        .args([
            "-c",
            "import sys, blosc2, numpy as np\n\
             s = blosc2.SChunk(chunksize=4096, urlpath=sys.argv[1], contiguous=False, mode='w', cparams={'typesize': 4})\n\
             a = np.arange(1024, dtype=np.int32)\n\
             for i in range(2000): s.append_data((a * 7 + i).tobytes())\n\
             open(sys.argv[2], 'wb').write(blosc2.open(sys.argv[1])[:])",
        ])
        .arg(&frame)
        .arg(&want)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = std::fs::read(&want).unwrap();
    assert_eq!(want.len(), 2000 * 4096);
    let mut m = m;
    m.child = Some(
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n 600 && exec {} -f -o cache_size=1M {} {}",
                bin().display(),
                m.src().display(),
                m.mp().display()
            ))
            .spawn()
            .unwrap(),
    );
    let mp = m.mp();
    wait_for(|| mount_answers(&mp), "the mount");
    for pass in 0..2 {
        let got = std::fs::read(mp.join("many")).unwrap();
        assert!(
            got == want,
            "pass {pass}: {} bytes, not the reference's",
            got.len()
        );
    }
    m.unmount();
}

/// The daemon's read system calls so far: one per FUSE request it took.
fn requests_of(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("syscr: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// `ls -l` of a large directory costs a request per few hundred entries,
/// not several per entry: the listing comes with every entry's attributes
/// (readdirplus) and, extended attributes being off by default, the kernel
/// stops asking for `security.selinux` and `system.posix_acl_access`. What
/// `ls -l` shows agrees with the source.
#[test]
fn ls_l_of_a_large_directory_takes_few_requests() {
    if !fuse_available() {
        return;
    }
    let m = Mount::prepare();
    let big = m.src().join("big");
    std::fs::create_dir(&big).unwrap();
    const N: usize = 20_000;
    for i in 0..N {
        std::fs::write(big.join(format!("f{i:05}")), vec![b'x'; i % 7]).unwrap();
    }
    let mut m = m.mount_foreground(&[]);
    let pid = m.child.as_ref().unwrap().id();
    let before = requests_of(pid);
    let listed = sh(&format!(
        "ls -l --time-style=+ {}",
        m.mp().join("big").display()
    ));
    let requests = requests_of(pid) - before;
    let source = sh(&format!("ls -l --time-style=+ {}", big.display()));
    assert!(listed.status.success());
    // Names, sizes and modes as on the source (owner and links too).
    let cols = |o: &std::process::Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    let (ours, theirs) = (cols(&listed), cols(&source));
    assert_eq!(ours.len(), N);
    assert_eq!(
        ours,
        theirs
            .iter()
            .map(|l| l.replacen("-rw-r--r--", "-r--r--r--", 1))
            .collect::<Vec<_>>()
    );
    assert!(
        requests < 1_000,
        "ls -l of {N} entries took {requests} requests"
    );
    m.unmount();
}
