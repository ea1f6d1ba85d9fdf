//! Zarr stores through a real mount (fixtures of zarr-python 2.18 and 3.1,
//! `scripts/fixtures/gen_zarr.py`): every file of every store reads as its
//! source, each array's `.npy` opens in numpy whole and memory-mapped and
//! reads random windows as zarr-python read the array, and zarr-python
//! reads the stores through the mount (`tests/zarr_check.py`).

use crate::ahead::stat;
use crate::common::*;
use crate::mount::Mount;
use std::path::Path;
use std::process::Command;

/// Every file under `dir` (relative paths).
fn files(top: &Path, dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            files(top, &e.path(), out);
        } else {
            out.push(e.path().strip_prefix(top).unwrap().to_path_buf());
        }
    }
}

#[test]
fn zarr_stores_and_their_npy_files_through_the_mount() {
    if !fuse_available() {
        return;
    }
    let py = python().expect("python with numpy and zarr (scripts/setup.sh)");
    let m = Mount::prepare();
    let src = m.src().join("zarr");
    copy(&fixture("zarr"), &src);
    let (mut m, log) = m.mount_logged(&[]);
    let mnt = m.mp().join("zarr");
    let mut all = Vec::new();
    files(&src, &src, &mut all);
    // The files inside each writer's `stores/`.
    let in_stores = |p: &&std::path::PathBuf| {
        p.components()
            .nth(1)
            .is_some_and(|c| c.as_os_str() == "stores")
    };
    let stored: Vec<_> = all.iter().filter(in_stores).collect();
    assert!(stored.len() > 50, "{} store files", stored.len());
    for rel in &stored {
        let want = std::fs::read(src.join(rel)).unwrap();
        let got = std::fs::read(mnt.join(rel)).unwrap_or_else(|e| panic!("{rel:?}: {e}"));
        assert!(got == want, "{rel:?}: other bytes through the mount");
    }
    let o = Command::new(&py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zarr_check.py"))
        .arg(&mnt)
        .arg(&src)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    m.unmount_without_panic(&log);
}

/// A 4 KiB read of the `.npy` of an array of 128 KiB Blosc chunks in
/// blocks of 4 KiB (`blocks.zarr`) decodes the two blocks it straddles,
/// counted by `user.bloscfs.stats`; reading on through the same handle
/// decodes each of the 64 stored blocks once in all.
#[test]
fn a_4k_read_of_a_zarr_npy_decodes_only_its_blocks() {
    if !fuse_available() {
        return;
    }
    use std::os::unix::fs::FileExt;
    use std::os::unix::io::AsRawFd;
    for w in ["z2-2.18.7", "z3-3.1.6"] {
        let m = Mount::prepare();
        let rel = format!("zarr/{w}/stores/blocks.zarr");
        copy(&fixture(&rel), &m.src().join("blocks.zarr"));
        let want = std::fs::read(fixture(&format!("zarr/{w}/expected/blocks.zarr.npy"))).unwrap();
        let want = as_bloscfs_shows(&want);
        let header = want.iter().position(|&b| b == b'\n').unwrap() + 1;
        let (mut m, log) = m.mount_logged(&["-o", "xattr"]);
        let mp = m.mp();
        let f = std::fs::File::open(mp.join("blocks.npy")).unwrap();
        // SAFETY: a valid descriptor; advice only (no read-ahead: the
        // daemon is asked for the 4 KiB read alone).
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        let before = stat(&mp, "blocks_decoded");
        // Bytes 8064..12160 of chunk 1: its blocks 1 and 2.
        let off = header + (128 << 10) + 8064;
        let mut buf = vec![0u8; 4096];
        f.read_exact_at(&mut buf, off as u64).unwrap();
        assert!(buf == want[off..off + 4096], "{w}");
        assert_eq!(stat(&mp, "blocks_decoded") - before, 2, "{w}");
        let mut all = vec![0u8; want.len()];
        f.read_exact_at(&mut all, 0).unwrap();
        assert!(all == want, "{w}: the whole .npy");
        assert_eq!(stat(&mp, "blocks_decoded") - before, 64, "{w}");
        drop(f);
        m.unmount_without_panic(&log);
    }
}

/// Handles open at once on the `.npy` of an array of chunks decoded
/// whole (v3 zstd: `zstd.zarr`, 3 chunks written) share what is decoded:
/// reading it all through each in turn (the page cache dropped before
/// each) fetches every chunk once (`source_bytes_read` is the chunk
/// files' size), each read as zarr-python read it.
#[test]
fn handles_open_at_once_on_a_zarr_npy_fetch_each_chunk_once() {
    if !fuse_available() {
        return;
    }
    use std::os::unix::fs::FileExt;
    use std::os::unix::io::AsRawFd;
    let m = Mount::prepare();
    let dir = fixture("zarr/z3-3.1.6/stores/zstd.zarr");
    copy(&dir, &m.src().join("zstd.zarr"));
    let want = std::fs::read(fixture("zarr/z3-3.1.6/expected/zstd.zarr.npy")).unwrap();
    let want = as_bloscfs_shows(&want);
    let chunk_bytes: u64 = ["c/0/0", "c/0/1", "c/2/0"]
        .iter()
        .map(|k| std::fs::metadata(dir.join(k)).unwrap().len())
        .sum();
    let (mut m, log) = m.mount_logged(&["-o", "xattr"]);
    let mp = m.mp();
    let before = stat(&mp, "source_bytes_read");
    let files: Vec<_> = (0..4)
        .map(|_| std::fs::File::open(mp.join("zstd.npy")).unwrap())
        .collect();
    for f in &files {
        // SAFETY: a valid descriptor; advice only (the read goes to the
        // daemon, not the page cache).
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let mut all = vec![0u8; want.len()];
        f.read_exact_at(&mut all, 0).unwrap();
        assert!(all == want, "other bytes than zarr-python's");
    }
    assert_eq!(stat(&mp, "source_bytes_read") - before, chunk_bytes);
    drop(files);
    m.unmount_without_panic(&log);
}
