//! The presented tree without a mount: names, collisions, sizes, reads,
//! attributes, holes.

use crate::common;
use bloscfs::fs::{Filled, Fs, FsOptions, Kind, ROOT_INO};
use common::*;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

fn tree() -> (tempfile::TempDir, Fs) {
    let d = tempfile::tempdir().unwrap();
    let s = d.path();
    copy(
        &fixture("frame/blocks-lz4.b2frame"),
        &s.join("series.b2frame"),
    );
    copy(&fixture("b2nd/array1-2d.b2nd"), &s.join("grid.b2nd"));
    copy(&fixture("bloscpack/ndarray-1.blp"), &s.join("fortran.blp"));
    copy(
        &fixture("chunk1")
            .read_dir()
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path(),
        &s.join("one.blosc"),
    );
    copy(&fixture("frame/special-zero.b2frame"), &s.join("zeros.b2"));
    // Collision: "taken" exists as a plain file, so taken.b2 keeps its name.
    std::fs::write(s.join("taken"), b"plain").unwrap();
    copy(&fixture("frame/special-nan.b2frame"), &s.join("taken.b2"));
    // A sparse frame directory appears as one file.
    let sparse = std::fs::read_dir(fixture("frame"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .expect("a sparse frame fixture");
    copy(&sparse, &s.join("sparse.b2frame"));
    std::fs::create_dir(s.join("sub")).unwrap();
    std::fs::write(s.join("sub/readme.txt"), b"hello").unwrap();
    // Looks like a frame, is not: passes through as raw bytes.
    let mut fake = std::fs::read(fixture("frame/blocks-lz4.b2frame")).unwrap();
    fake.truncate(40);
    std::fs::write(s.join("broken.b2frame"), &fake).unwrap();
    std::os::unix::fs::symlink("series.b2frame", s.join("link")).unwrap();
    let fs = Fs::new(s, &FsOptions::default()).unwrap();
    (d, fs)
}

#[test]
fn names_sizes_and_kinds() {
    let (_d, fs) = tree();
    assert_eq!(
        names(&fs, ROOT_INO),
        [
            ".",
            "..",
            "broken.b2frame",
            "fortran.npy",
            "grid.npy",
            "link",
            "one",
            "series",
            "sparse",
            "sub",
            "taken",
            "taken.b2",
            "zeros"
        ]
    );
    let a = fs.lookup(ROOT_INO, OsStr::new("series")).unwrap();
    assert_eq!(a.kind, Kind::File);
    assert_eq!(
        a.size,
        reference_bytes("frame/blocks-lz4.b2frame").len() as u64
    );
    assert_eq!(a.perm & 0o222, 0, "read-only");
    let sparse = fs.lookup(ROOT_INO, OsStr::new("sparse")).unwrap();
    assert_eq!(sparse.kind, Kind::File);
    assert!(sparse.blocks > 0, "du counts the chunk files");
    assert_eq!(
        fs.lookup(ROOT_INO, OsStr::new("link")).unwrap().kind,
        Kind::Symlink
    );
    assert_eq!(
        fs.lookup(ROOT_INO, OsStr::new("sub")).unwrap().kind,
        Kind::Dir
    );
    assert_eq!(
        fs.lookup(ROOT_INO, OsStr::new("broken.b2frame"))
            .unwrap()
            .size,
        40
    );
    assert_eq!(
        fs.lookup(ROOT_INO, OsStr::new("nope")).unwrap_err(),
        libc::ENOENT
    );
    // Stable inode numbers.
    assert_eq!(
        a.ino,
        fs.lookup(ROOT_INO, OsStr::new("series")).unwrap().ino
    );
}

#[test]
fn reads_are_exact_and_writes_refused() {
    let (_d, fs) = tree();
    let a = fs.lookup(ROOT_INO, OsStr::new("series")).unwrap();
    assert_eq!(fs.open(a.ino, true).unwrap_err(), libc::EROFS);
    let (fh, keep) = fs.open(a.ino, false).unwrap();
    assert!(!keep);
    let whole = reference_bytes("frame/blocks-lz4.b2frame");
    let got = fs.read(fh, 1_000_000, 131072).unwrap();
    assert_eq!(got, whole[1_000_000..1_131_072]);
    let tail = fs.read(fh, whole.len() as u64 - 10, 4096).unwrap();
    assert_eq!(tail, whole[whole.len() - 10..]);
    fs.release(fh);
    // Unchanged source: the kernel may keep its cache on the next open.
    let (fh2, keep2) = fs.open(a.ino, false).unwrap();
    assert!(keep2);
    fs.release(fh2);
    let g = fs.lookup(ROOT_INO, OsStr::new("grid.npy")).unwrap();
    let (fh, _) = fs.open(g.ino, false).unwrap();
    assert_eq!(
        fs.read(fh, 0, 1 << 20).unwrap(),
        reference_bytes("b2nd/array1-2d.b2nd")
    );
    let t = fs.lookup(ROOT_INO, OsStr::new("taken")).unwrap();
    let (fh, _) = fs.open(t.ino, false).unwrap();
    assert_eq!(fs.read(fh, 0, 100).unwrap(), b"plain");
}

#[test]
fn xattrs_and_stats() {
    let (_d, fs) = tree();
    let a = fs.lookup(ROOT_INO, OsStr::new("series")).unwrap();
    let get = |n: &str| String::from_utf8(fs.getxattr(a.ino, OsStr::new(n)).unwrap()).unwrap();
    assert_eq!(get("user.blosc.format"), "blosc2-frame");
    assert_eq!(get("user.blosc.codec"), "lz4");
    assert_eq!(get("user.blosc.filters"), "shuffle");
    assert_eq!(get("user.blosc.typesize"), "8");
    assert_eq!(get("user.blosc.blocksize"), "65536");
    assert_eq!(get("user.blosc.nchunks"), "4");
    let list = fs.listxattr(a.ino).unwrap();
    assert!(list.split(|&b| b == 0).any(|n| n == b"user.blosc.cratio"));
    let g = fs.lookup(ROOT_INO, OsStr::new("grid.npy")).unwrap();
    assert_eq!(
        fs.getxattr(g.ino, OsStr::new("user.blosc.shape")).unwrap(),
        b"[97, 131]"
    );
    assert!(fs
        .getxattr(g.ino, OsStr::new("user.blosc.meta.b2nd"))
        .is_ok());
    let stats = String::from_utf8(
        fs.getxattr(ROOT_INO, OsStr::new("user.bloscfs.stats"))
            .unwrap(),
    )
    .unwrap();
    assert!(stats.contains("blocks_decoded="), "{stats}");
}

#[test]
fn zero_chunks_are_holes() {
    let (_d, fs) = tree();
    let z = fs.lookup(ROOT_INO, OsStr::new("zeros")).unwrap();
    let (fh, _) = fs.open(z.ino, false).unwrap();
    assert_eq!(fs.lseek(fh, 0, libc::SEEK_HOLE).unwrap(), 0);
    assert_eq!(fs.lseek(fh, 0, libc::SEEK_DATA).unwrap_err(), libc::ENXIO);
    let s = fs.lookup(ROOT_INO, OsStr::new("series")).unwrap();
    let (fh, _) = fs.open(s.ino, false).unwrap();
    assert_eq!(fs.lseek(fh, 5, libc::SEEK_DATA).unwrap(), 5);
    assert_eq!(fs.lseek(fh, 5, libc::SEEK_HOLE).unwrap(), s.size as i64);
}

#[test]
fn a_replaced_source_is_served_fresh() {
    let (d, fs) = tree();
    let a = fs.lookup(ROOT_INO, OsStr::new("zeros")).unwrap();
    let (fh, _) = fs.open(a.ino, false).unwrap();
    assert_eq!(fs.read(fh, 0, 8).unwrap(), vec![0u8; 8]);
    fs.release(fh);
    // Replace by rename with a NaN frame of the same name.
    let tmp = d.path().join(".new");
    copy(&fixture("frame/special-nan.b2frame"), &tmp);
    std::fs::rename(&tmp, d.path().join("zeros.b2")).unwrap();
    let a2 = fs.lookup(ROOT_INO, OsStr::new("zeros")).unwrap();
    let (fh, keep) = fs.open(a2.ino, false).unwrap();
    assert!(!keep);
    let v = fs.read(fh, 0, 8).unwrap();
    assert!(f64::from_le_bytes(v.try_into().unwrap()).is_nan());
}

#[test]
fn a_source_truncated_while_open_gives_eio_not_a_crash() {
    let (d, fs) = tree();
    let a = fs.lookup(ROOT_INO, OsStr::new("series")).unwrap();
    let (fh, _) = fs.open(a.ino, false).unwrap();
    assert!(fs.read(fh, 0, 4096).is_ok());
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(d.path().join("series.b2frame"))
        .unwrap();
    f.set_len(5000).unwrap();
    // Reads of chunks no longer there fail with EIO; the process lives on.
    assert_eq!(fs.read(fh, 3 << 20, 4096).unwrap_err(), libc::EIO);
    // Other files are still served.
    let g = fs.lookup(ROOT_INO, OsStr::new("grid.npy")).unwrap();
    let (gh, _) = fs.open(g.ino, false).unwrap();
    assert_eq!(
        fs.read(gh, 0, 1 << 20).unwrap(),
        reference_bytes("b2nd/array1-2d.b2nd")
    );
}

#[test]
fn a_source_rewritten_in_place_while_open_is_eio_then_fresh() {
    let (d, fs) = tree();
    let a = fs.lookup(ROOT_INO, OsStr::new("zeros")).unwrap();
    let (fh, _) = fs.open(a.ino, false).unwrap();
    assert_eq!(fs.read(fh, 0, 8).unwrap(), vec![0u8; 8]);
    // Rewrite the same file (same inode) with the NaN frame's bytes.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(
        d.path().join("zeros.b2"),
        std::fs::read(fixture("frame/special-nan.b2frame")).unwrap(),
    )
    .unwrap();
    // The open handle never serves old offsets over new bytes.
    assert_eq!(fs.read(fh, 0, 8).unwrap_err(), libc::EIO);
    fs.release(fh);
    let a2 = fs.lookup(ROOT_INO, OsStr::new("zeros")).unwrap();
    let (fh, keep) = fs.open(a2.ino, false).unwrap();
    assert!(!keep, "the kernel must drop its cached pages");
    let v = fs.read(fh, 0, 8).unwrap();
    assert!(f64::from_le_bytes(v.try_into().unwrap()).is_nan());
}

/// A Blosc2 chunk of 800,000 zero bytes as python-blosc2 writes it (32-byte
/// header, special "zeros" flag): a stored chunk whose layout is all zeros.
const ZERO_CHUNK: &str = "0501850800350c00000008002000000000000000000105000000000000000010";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn collisions_keep_source_names_whatever_the_order() {
    let d = tempfile::tempdir().unwrap();
    let s = d.path();
    let frame = fixture("frame/blocks-lz4.b2frame");
    // a.b2 and a.b2frame both want "a"; a.b2.b2 wants "a.b2", a source name.
    for n in [
        "a.b2",
        "a.b2.b2",
        "a.b2frame",
        "x.b2",
        "x.blosc",
        "solo.bl2",
    ] {
        copy(&frame, &s.join(n));
    }
    let fs = Fs::new(s, &FsOptions::default()).unwrap();
    assert_eq!(
        names(&fs, ROOT_INO),
        [
            ".",
            "..",
            "a.b2",
            "a.b2.b2",
            "a.b2frame",
            "solo",
            "x.b2",
            "x.blosc"
        ]
    );
    // Every presented name serves its own source.
    let size = reference_bytes("frame/blocks-lz4.b2frame").len() as u64;
    for n in ["a.b2", "a.b2.b2", "a.b2frame", "solo", "x.b2", "x.blosc"] {
        assert_eq!(
            fs.lookup(ROOT_INO, OsStr::new(n)).unwrap().size,
            size,
            "{n}"
        );
    }
}

#[test]
fn stored_zero_chunks_are_holes() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("z.b2"), unhex(ZERO_CHUNK)).unwrap();
    let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
    let z = fs.lookup(ROOT_INO, OsStr::new("z")).unwrap();
    assert_eq!(z.size, 800_000);
    let (fh, _) = fs.open(z.ino, false).unwrap();
    assert_eq!(fs.lseek(fh, 1000, libc::SEEK_HOLE).unwrap(), 1000);
    assert_eq!(fs.lseek(fh, 0, libc::SEEK_DATA).unwrap_err(), libc::ENXIO);
    assert_eq!(fs.read(fh, 799_990, 100).unwrap(), vec![0u8; 10]);
}

#[test]
fn opened_containers_do_not_pile_up_file_descriptors() {
    let d = tempfile::tempdir().unwrap();
    let chunk = unhex(ZERO_CHUNK);
    for i in 0..700 {
        std::fs::write(d.path().join(format!("c{i}.b2")), &chunk).unwrap();
    }
    let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
    let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    let before = fds();
    for i in 0..700 {
        let a = fs.lookup(ROOT_INO, OsStr::new(&format!("c{i}"))).unwrap();
        let (fh, _) = fs.open(a.ino, false).unwrap();
        assert_eq!(fs.read(fh, 0, 4).unwrap(), [0; 4]);
        fs.release(fh);
    }
    // Bounded by the container cache (256), not by the files ever opened.
    let grown = fds().saturating_sub(before);
    assert!(grown < 400, "{grown} more descriptors after 700 opens");
}

/// A listing of 10,000 containers and a lookup of each (`ls -l` without
/// readdirplus) probe each file once: lookups and the next listing use
/// what was probed.
#[test]
fn a_listing_of_ten_thousand_containers_probes_each_once() {
    let d = tempfile::tempdir().unwrap();
    let chunk = unhex(ZERO_CHUNK);
    for i in 0..10_000 {
        std::fs::write(d.path().join(format!("c{i:05}.b2")), &chunk).unwrap();
    }
    let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
    let entries = fs.readdir(ROOT_INO).unwrap();
    assert_eq!(entries.len(), 10_002);
    for e in &entries[2..] {
        assert_eq!(fs.lookup(ROOT_INO, &e.name).unwrap().size, 800_000);
    }
    assert_eq!(fs.readdir(ROOT_INO).unwrap().len(), 10_002);
    assert_eq!(fs.probes_run(), 10_000);
}

/// The reply buffer is reused between requests without being zeroed: no
/// byte of an earlier reply may show in a later, shorter one.
#[test]
fn a_reused_reply_buffer_never_leaks_old_bytes() {
    let (_d, fs) = tree();
    let whole = reference_bytes("frame/blocks-lz4.b2frame");
    let a = fs.lookup(ROOT_INO, OsStr::new("series")).unwrap();
    let (fh, _) = fs.open(a.ino, false).unwrap();
    let mut buf = vec![0xAAu8; 2 << 20];
    fs.read_into(fh, 4096, 1 << 20, &mut buf).unwrap();
    assert_eq!(buf, whole[4096..4096 + (1 << 20)]);
    // Shorter than asked at the end of the file.
    buf.fill(0x55);
    let at = whole.len() as u64 - 777;
    fs.read_into(fh, at, 1 << 20, &mut buf).unwrap();
    assert_eq!(buf, whole[at as usize..]);
    // Past the end: nothing.
    fs.read_into(fh, whole.len() as u64 + 5, 4096, &mut buf)
        .unwrap();
    assert!(buf.is_empty());
    // A plain file, into a dirty buffer.
    let mut dirty = vec![0xEEu8; 64 << 10];
    let t = fs.lookup(ROOT_INO, OsStr::new("taken")).unwrap();
    let (th, _) = fs.open(t.ino, false).unwrap();
    assert_eq!(fs.read_into(th, 0, 4096, &mut dirty), Ok(Filled::Buf));
    assert_eq!(dirty, b"plain");
}

/// Reads wholly inside zero chunks are answered as zeros without filling a
/// buffer; reads that touch data are filled, and both give the bytes the
/// library reads.
#[test]
fn reads_of_holes_are_zeros_without_a_buffer() {
    let d = tempfile::tempdir().unwrap();
    let src = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/frame/special-mixed.b2frame");
    copy(&src, &d.path().join("mixed.b2frame"));
    let whole = {
        let c = blosc_decode::open_path(&src).unwrap().unwrap();
        let mut v = vec![0u8; c.len() as usize];
        assert_eq!(c.read_at(0, &mut v).unwrap(), v.len());
        v
    };
    // Chunks of 4000 bytes: 1 and 4 (the short last one) are zero chunks.
    assert!(whole[4000..8000].iter().all(|&b| b == 0));
    assert!(whole[..4000].iter().any(|&b| b != 0));
    let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
    let m = fs.lookup(ROOT_INO, OsStr::new("mixed")).unwrap();
    let (fh, _) = fs.open(m.ino, false).unwrap();
    let mut buf = vec![0xEEu8; 8192];
    for (off, len, hole) in [
        (4000u64, 4000u32, true),
        (4100, 100, true),
        (16000, 1200, true),
        (16500, 4096, true), // runs past the end: 700 bytes, all zeros
        (3999, 2, false),
        (7999, 2, false),
        (0, 8192, false),
        (12000, 8192, false),
    ] {
        let r = fs.read_into(fh, off, len, &mut buf).unwrap();
        let want = &whole[off as usize..(off as usize + len as usize).min(whole.len())];
        match r {
            Filled::Zeros(n) => {
                assert!(hole, "{off}+{len} answered as zeros");
                assert_eq!(n, want.len());
                assert!(want.iter().all(|&b| b == 0));
            }
            Filled::Buf => {
                assert!(!hole, "{off}+{len} filled a buffer");
                assert_eq!(&buf[..], want, "{off}+{len}");
            }
            Filled::Shared(..) => panic!("{off}+{len}: a small file has no spans"),
        }
        assert_eq!(fs.read(fh, off, len).unwrap(), want, "{off}+{len}");
    }
    // A 30x40 f4 array as .npy, chunks 16x16: chunks 0 and 1 (rows 0-15,
    // columns 0-31) hold data, the other four are zero chunks, so rows
    // 16-29 are holes and row 0 is not.
    let src = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/frame/b2nd-zeros-2d.b2nd");
    copy(&src, &d.path().join("z2.b2nd"));
    let lib = blosc_decode::open_path(&src).unwrap().unwrap();
    let mut want = vec![0u8; lib.len() as usize];
    lib.read_at(0, &mut want).unwrap();
    let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
    let a = fs.lookup(ROOT_INO, OsStr::new("z2.npy")).unwrap();
    let (fh, _) = fs.open(a.ino, false).unwrap();
    assert_eq!(fs.read(fh, 0, a.size as u32).unwrap(), want);
    let hl = a.size - 30 * 40 * 4;
    let row = 40 * 4;
    assert_eq!(fs.read_into(fh, hl, row as u32, &mut buf), Ok(Filled::Buf));
    assert_eq!(&buf[..], &want[hl as usize..(hl + row) as usize]);
    let holes = (a.size - (hl + 16 * row)) as u32;
    assert_eq!(
        fs.read_into(fh, hl + 16 * row, holes, &mut buf),
        Ok(Filled::Zeros(holes as usize))
    );
    assert!(want[(hl + 16 * row) as usize..].iter().all(|&b| b == 0));
}

/// A lookup without a listing at hand looks only at the source names that
/// could be presented under the name asked for: it must find exactly what
/// the listing finds, collisions, arrays, plain files, directories, links
/// and names nothing is presented as included.
#[test]
fn lookups_without_a_listing_agree_with_the_listing() {
    let (d, _) = tree();
    let s = d.path();
    let frame = fixture("frame/blocks-lz4.b2frame");
    let array = fixture("b2nd/array1-2d.b2nd");
    // More collisions: two containers wanting "a"; "a.b2.b2" wants the
    // source name "a.b2"; "m.b2nd" and "m" both want "m.npy"; "k.npy.b2"
    // is a frame wanting "k.npy" while "k.b2nd" is an array wanting it too;
    // "p.b2" is a directory (not a container) next to a plain "p.npy".
    for n in ["a.b2", "a.b2.b2", "a.b2frame", "k.npy.b2"] {
        copy(&frame, &s.join(n));
    }
    for n in ["m.b2nd", "m", "k.b2nd", "solo.b2nd", "arr"] {
        copy(&array, &s.join(n));
    }
    std::fs::create_dir(s.join("p.b2")).unwrap();
    std::fs::write(s.join("p.npy"), b"plain").unwrap();
    // A name that is not UTF-8: lookups of names like it use the listing.
    std::fs::write(
        s.join(OsStr::from_bytes(b"bad\xff.b2")),
        std::fs::read(&frame).unwrap(),
    )
    .unwrap();
    let listed = Fs::new(s, &FsOptions::default()).unwrap();
    let presented = names(&listed, ROOT_INO);
    let mut asked: Vec<std::ffi::OsString> = presented.iter().map(Into::into).collect();
    for e in std::fs::read_dir(s).unwrap() {
        asked.push(e.unwrap().file_name());
    }
    for n in [
        "nope",
        "a.npy",
        "m.npy.npy",
        "k",
        "p",
        "p.npy.npy",
        "solo",
        "arr.npy",
        "x.b2frame",
    ] {
        asked.push(n.into());
    }
    asked.push(OsStr::from_bytes(b"bad\xff").into());
    asked.push(OsStr::from_bytes(b"nope\xff").into());
    let look = |fs: &Fs, n: &OsStr| fs.lookup(ROOT_INO, n).map(|a| (a.ino, a.size, a.kind));
    for n in &asked {
        // A fresh tree each time, so that no listing is at hand.
        let fresh = Fs::new(s, &FsOptions::default()).unwrap();
        assert_eq!(look(&fresh, n), look(&listed, n), "{n:?}");
    }
    assert!(presented.contains(&"arr.npy".to_string()), "{presented:?}");
    assert!(presented.contains(&"k.npy.b2".to_string()), "{presented:?}");
}

/// "." and "..", and names with a slash, are never looked up as source
/// paths (a slash would reach into a subdirectory).
#[test]
fn lookup_refuses_dot_names_and_slashes() {
    let (_d, fs) = tree();
    for n in [".", "..", "sub/readme.txt", ""] {
        assert_eq!(
            fs.lookup(ROOT_INO, OsStr::new(n)).unwrap_err(),
            libc::ENOENT,
            "{n:?}"
        );
    }
}

/// Make a fifo at `at` (replacing whatever is there) and, after 5 s, open
/// it for writing from another thread: if anything is stuck opening it for
/// reading, that unblocks it (so the test fails on time, not hangs).
fn fifo_over(at: &std::path::Path) -> std::thread::JoinHandle<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = at.with_extension("fifo-tmp");
    let c = std::ffi::CString::new(tmp.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    std::fs::rename(&tmp, at).unwrap();
    let at = at.to_path_buf();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(5));
        // O_RDWR on a fifo never blocks; it keeps the fifo open for a while.
        if let Ok(f) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&at)
        {
            std::thread::sleep(std::time::Duration::from_secs(1));
            drop(f);
        }
    })
}

/// Opening a fifo for reading waits for a writer: a source file or a sparse
/// frame's chunk file replaced by a fifo hung the daemon thread that opened
/// it (every thread, after a few opens). Now anything but a regular file is
/// refused at once (EIO), and everything else is still served.
#[test]
fn a_fifo_in_place_of_a_source_or_chunk_file_is_refused_at_once() {
    let (d, fs) = tree();
    let t0 = std::time::Instant::now();
    // A plain file, looked up, then replaced by a fifo.
    let plain = fs.lookup(ROOT_INO, OsStr::new("taken")).unwrap();
    let w1 = fifo_over(&d.path().join("taken"));
    let opened = fs.open(plain.ino, false);
    assert!(t0.elapsed().as_secs() < 4, "open waited for a writer");
    assert!(opened.is_err(), "a fifo was opened as a plain file");

    // A chunk file of the sparse frame.
    let t1 = std::time::Instant::now();
    let s = fs.lookup(ROOT_INO, OsStr::new("sparse")).unwrap();
    let w2 = fifo_over(&d.path().join("sparse.b2frame/00000000.chunk"));
    let (fh, _) = fs.open(s.ino, false).unwrap();
    let mut errors = 0;
    let mut at = 0;
    while at < s.size {
        match fs.read(fh, at, 65536) {
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e, libc::EIO);
                errors += 1;
            }
        }
        at += 65536;
    }
    assert!(t1.elapsed().as_secs() < 4, "a read waited for a writer");
    assert!(errors > 0, "chunk 0 was read from a fifo");

    // The rest is still served.
    let g = fs.lookup(ROOT_INO, OsStr::new("grid.npy")).unwrap();
    let (gh, _) = fs.open(g.ino, false).unwrap();
    assert_eq!(
        fs.read(gh, 0, 1 << 20).unwrap(),
        reference_bytes("b2nd/array1-2d.b2nd")
    );
    w1.join().unwrap();
    w2.join().unwrap();
}

/// A source served as raw bytes (here a frame cut inside its header, so
/// not seen as a container); once it changes (here: repaired, so it opens
/// as a container again) that raw handle fails with EIO instead of serving
/// raw bytes of an inode that now presents the container: the kernel's page
/// cache of one inode must never hold both views. A plain file that stays
/// plain is served as it is now.
#[test]
fn a_raw_handle_fails_once_its_source_may_be_a_container() {
    let d = tempfile::tempdir().unwrap();
    let s = d.path();
    let good = std::fs::read(fixture("frame/blocks-lz4.b2frame")).unwrap();
    std::fs::write(s.join("cut.b2frame"), &good[..40]).unwrap();
    std::fs::write(s.join("log.txt"), b"one\n").unwrap();
    let fs = Fs::new(s, &FsOptions::default()).unwrap();
    let cut = fs.lookup(ROOT_INO, OsStr::new("cut.b2frame")).unwrap();
    let (raw, _) = fs.open(cut.ino, false).unwrap();
    assert_eq!(fs.read(raw, 0, 64).unwrap(), good[..40]);
    let log = fs.lookup(ROOT_INO, OsStr::new("log.txt")).unwrap();
    let (lh, _) = fs.open(log.ino, false).unwrap();
    assert_eq!(fs.read(lh, 0, 64).unwrap(), b"one\n");
    // Repaired in place (same inode): a container again.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(s.join("cut.b2frame"), &good).unwrap();
    assert_eq!(fs.read(raw, 0, 64).unwrap_err(), libc::EIO);
    let (fh, keep) = fs.open(cut.ino, false).unwrap();
    assert!(!keep);
    assert_eq!(
        fs.read(fh, 0, 1 << 20).unwrap(),
        reference_bytes("frame/blocks-lz4.b2frame")[..1 << 20]
    );
    // The plain file grows: still served, as it is now.
    std::fs::write(s.join("log.txt"), b"one\ntwo\n").unwrap();
    assert_eq!(fs.read(lh, 0, 64).unwrap(), b"one\ntwo\n");
}

/// The kernel asks its page cache's reads only below the size it holds for
/// the file. A paged read that reaches a page past the end of the version a
/// handle serves means the kernel holds another version's size: answering
/// short would have it keep zero-filled pages as content, so it fails with
/// EIO. The last, partial page of the file and direct reads are answered
/// short as usual.
#[test]
fn a_paged_read_past_the_version_a_handle_serves_fails() {
    let (d, fs) = tree();
    let want = reference_bytes("frame/blocks-lz4.b2frame");
    let len = want.len() as u64;
    let a = fs.lookup(ROOT_INO, OsStr::new("series")).unwrap();
    let (fh, _) = fs.open(a.ino, false).unwrap();
    let mut buf = Vec::new();
    let page = len / 4096 * 4096;
    let last = (len - page) as usize;
    assert!(last > 0, "the fixture ends inside a page");
    // The last page: answered short (the file ends there).
    assert!(matches!(
        fs.read_request(
            fh,
            page,
            4096,
            true,
            &mut buf,
            &mut blosc_decode::Deferred::new()
        ),
        Ok(Filled::Buf)
    ));
    assert_eq!(buf, want[page as usize..]);
    // Reaching the page after it: the kernel's size is not this version's.
    assert_eq!(
        fs.read_request(
            fh,
            page,
            8192,
            true,
            &mut buf,
            &mut blosc_decode::Deferred::new()
        )
        .err()
        .map(|e| e.errno()),
        Some(libc::EIO)
    );
    assert_eq!(
        fs.read_request(
            fh,
            page + 4096,
            4096,
            true,
            &mut buf,
            &mut blosc_decode::Deferred::new()
        )
        .err()
        .map(|e| e.errno()),
        Some(libc::EIO)
    );
    // A direct read past the end is short, as for any file.
    assert!(fs
        .read_request(
            fh,
            page,
            8192,
            false,
            &mut buf,
            &mut blosc_decode::Deferred::new()
        )
        .is_ok());
    assert_eq!(buf.len(), last);
    // A plain file cut while open: the pages it no longer has fail.
    let p = d.path().join("sub/readme.txt");
    let r = fs.lookup(ROOT_INO, OsStr::new("sub")).unwrap();
    let r = fs.lookup(r.ino, OsStr::new("readme.txt")).unwrap();
    std::fs::write(&p, vec![7u8; 10_000]).unwrap();
    let (ph, _) = fs.open(r.ino, false).unwrap();
    assert!(fs
        .read_request(
            ph,
            0,
            12_288,
            true,
            &mut buf,
            &mut blosc_decode::Deferred::new()
        )
        .is_ok());
    assert_eq!(buf.len(), 10_000);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(3000)
        .unwrap();
    assert_eq!(
        fs.read_request(
            ph,
            0,
            12_288,
            true,
            &mut buf,
            &mut blosc_decode::Deferred::new()
        )
        .err()
        .map(|e| e.errno()),
        Some(libc::EIO)
    );
    assert!(fs
        .read_request(
            ph,
            0,
            4096,
            true,
            &mut buf,
            &mut blosc_decode::Deferred::new()
        )
        .is_ok());
    assert_eq!(buf, vec![7u8; 3000]);
}

/// A sparse frame's chunk file rewritten in place while its index stays as
/// it was: an open handle's reads of that chunk fail with EIO (never the
/// new bytes read with the old layout), and the next open sees the new
/// chunk (the container is opened afresh, though the index is unchanged).
#[test]
fn a_sparse_frame_chunk_file_rewritten_in_place_is_eio_then_fresh() {
    let d = tempfile::tempdir().unwrap();
    let s = d.path();
    let name = "frame/blosclz-bitshuffle-ts4-s.b2frame";
    copy(&fixture(name), &s.join("sp.b2frame"));
    let want = reference_bytes(name);
    // No block cache: every read goes to the chunk files.
    let opts = FsOptions {
        cache_size: 0,
        ..FsOptions::default()
    };
    let fs = Fs::new(s, &opts).unwrap();
    let a = fs.lookup(ROOT_INO, OsStr::new("sp")).unwrap();
    let (fh, _) = fs.open(a.ino, false).unwrap();
    assert_eq!(fs.read(fh, 0, 8192).unwrap(), want[..8192]);
    // Chunk 0's file now holds chunk 1 (same size: only its times change).
    std::thread::sleep(std::time::Duration::from_millis(20));
    let c1 = std::fs::read(s.join("sp.b2frame/00000001.chunk")).unwrap();
    std::fs::write(s.join("sp.b2frame/00000000.chunk"), &c1).unwrap();
    assert_eq!(fs.read(fh, 0, 4096).unwrap_err(), libc::EIO);
    // Chunks whose files did not change are still served.
    assert_eq!(fs.read(fh, 4096, 4096).unwrap(), want[4096..8192]);
    fs.release(fh);
    let (fh, _) = fs.open(a.ino, false).unwrap();
    assert_eq!(fs.read(fh, 0, 4096).unwrap(), want[4096..8192]);
}

/// A name replaced by another file (rename over it; the same happens when
/// a file is deleted and its inode number reused): the old inode number is
/// stale (`ESTALE`, so the kernel looks the name up again) and the name
/// gets a new one; `fstat` through a handle opened before still describes
/// the file it opened, whose bytes it still reads.
#[test]
fn a_name_replaced_by_another_file_is_stale_under_its_old_inode() {
    let d = tempfile::tempdir().unwrap();
    let s = d.path();
    std::fs::write(s.join("x.txt"), b"old").unwrap();
    let fs = Fs::new(s, &FsOptions::default()).unwrap();
    let a = fs.lookup(ROOT_INO, OsStr::new("x.txt")).unwrap();
    let (fh, _) = fs.open(a.ino, false).unwrap();
    std::fs::write(s.join(".t"), b"new!").unwrap();
    std::fs::rename(s.join(".t"), s.join("x.txt")).unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap_err(), libc::ESTALE);
    assert_eq!(fs.open(a.ino, false).unwrap_err(), libc::ESTALE);
    assert_eq!(fs.getattr_open(a.ino, Some(fh)).unwrap().size, 3);
    assert_eq!(fs.read(fh, 0, 10).unwrap(), b"old");
    let b = fs.lookup(ROOT_INO, OsStr::new("x.txt")).unwrap();
    assert_ne!(b.ino, a.ino);
    let (fh2, _) = fs.open(b.ino, false).unwrap();
    assert_eq!(fs.read(fh2, 0, 10).unwrap(), b"new!");
    // Deleted: gone by name, still described through its open handle.
    std::fs::remove_file(s.join("x.txt")).unwrap();
    assert_eq!(fs.getattr(b.ino).unwrap_err(), libc::ESTALE);
    assert_eq!(fs.getattr_open(b.ino, Some(fh2)).unwrap().size, 4);
    assert_eq!(fs.getattr_open(b.ino, None).unwrap_err(), libc::ESTALE);
    assert_eq!(
        fs.lookup(ROOT_INO, OsStr::new("x.txt")).unwrap_err(),
        libc::ENOENT
    );
}

/// The daemon keeps an inode while the kernel holds lookups of it, and
/// drops it when they are all forgotten.
#[test]
fn inodes_go_when_the_kernel_forgets_them() {
    let (_d, fs) = tree();
    assert_eq!(fs.nodes_held(), 0);
    let a = fs.lookup(ROOT_INO, OsStr::new("series")).unwrap();
    let b = fs.lookup(ROOT_INO, OsStr::new("series")).unwrap();
    assert_eq!(a.ino, b.ino);
    fs.lookup(ROOT_INO, OsStr::new("grid.npy")).unwrap();
    assert_eq!(fs.nodes_held(), 2);
    fs.forget(a.ino, 1);
    assert!(fs.getattr(a.ino).is_ok(), "one lookup is still held");
    fs.forget(a.ino, 1);
    assert_eq!(fs.getattr(a.ino).unwrap_err(), libc::ENOENT);
    assert_eq!(fs.nodes_held(), 1);
    // The root is never forgotten.
    fs.forget(ROOT_INO, 1);
    assert!(fs.getattr(ROOT_INO).is_ok());
}

/// A file with two names: when the name its inode was last looked up by
/// goes, requests for the inode are stale (`ESTALE`: the kernel looks its
/// name up again and finds the file under the name that is left), not
/// "no such file".
#[test]
fn a_hard_link_left_after_its_other_name_goes_is_found_again() {
    let d = tempfile::tempdir().unwrap();
    let s = d.path();
    std::fs::write(s.join("one"), b"data").unwrap();
    std::fs::hard_link(s.join("one"), s.join("two")).unwrap();
    let fs = Fs::new(s, &FsOptions::default()).unwrap();
    let a = fs.lookup(ROOT_INO, OsStr::new("one")).unwrap();
    let b = fs.lookup(ROOT_INO, OsStr::new("two")).unwrap();
    assert_eq!(a.ino, b.ino);
    std::fs::remove_file(s.join("two")).unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap_err(), libc::ESTALE);
    let again = fs.lookup(ROOT_INO, OsStr::new("one")).unwrap();
    assert_eq!(again.ino, a.ino);
    let (fh, _) = fs.open(again.ino, false).unwrap();
    assert_eq!(fs.read(fh, 0, 10).unwrap(), b"data");
}

/// A directory renamed in the source, and another made under its old name:
/// names looked up in the directory's old inode are stale (`ESTALE`: the
/// kernel looks the directory up again), never found in the new directory
/// that holds the old path now.
#[test]
fn names_in_a_renamed_directory_are_not_looked_up_in_its_successor() {
    let d = tempfile::tempdir().unwrap();
    let s = d.path();
    std::fs::create_dir(s.join("a")).unwrap();
    std::fs::write(s.join("a/x"), b"first").unwrap();
    let fs = Fs::new(s, &FsOptions::default()).unwrap();
    let a = fs.lookup(ROOT_INO, OsStr::new("a")).unwrap();
    assert!(fs.lookup(a.ino, OsStr::new("x")).is_ok());
    std::fs::rename(s.join("a"), s.join("b")).unwrap();
    std::fs::create_dir(s.join("a")).unwrap();
    std::fs::write(s.join("a/x"), b"second").unwrap();
    assert_eq!(fs.lookup(a.ino, OsStr::new("x")).unwrap_err(), libc::ESTALE);
    assert_eq!(fs.readdir(a.ino).unwrap_err(), libc::ESTALE);
    // Looked up again, each name leads to its own directory.
    let a2 = fs.lookup(ROOT_INO, OsStr::new("a")).unwrap();
    let b = fs.lookup(ROOT_INO, OsStr::new("b")).unwrap();
    assert_ne!(a2.ino, a.ino);
    assert_eq!(b.ino, a.ino);
    let read = |dir: u64| {
        let x = fs.lookup(dir, OsStr::new("x")).unwrap();
        let (fh, _) = fs.open(x.ino, false).unwrap();
        fs.read(fh, 0, 64).unwrap()
    };
    assert_eq!(read(a2.ino), b"second");
    assert_eq!(read(b.ino), b"first");
}

/// A link to a container, relative inside the source, is rewritten to the
/// name the container is presented under, so it does not dangle in the
/// mount; links to anything else, and absolute ones, are left as they are.
#[test]
fn a_link_to_a_container_points_at_its_presented_name() {
    let d = tempfile::tempdir().unwrap();
    let s = d.path();
    copy(
        &fixture("frame/blocks-lz4.b2frame"),
        &s.join("data.b2frame"),
    );
    std::fs::write(s.join("notes.txt"), b"plain").unwrap();
    std::fs::create_dir(s.join("sub")).unwrap();
    let ln = |t: &str, l: &str| std::os::unix::fs::symlink(t, s.join(l)).unwrap();
    ln("data.b2frame", "cur");
    ln("../data.b2frame", "sub/up");
    ln("notes.txt", "plain");
    ln("/etc/data.b2frame", "abs");
    ln("missing.b2frame", "gone");
    // A container keeping its own name (collision), and a link to a link.
    copy(&fixture("frame/special-nan.b2frame"), &s.join("kept.b2"));
    std::fs::write(s.join("kept"), b"plain").unwrap();
    ln("kept.b2", "k");
    ln("cur", "again");
    // Leaving the source: not looked at.
    ln("../data.b2frame", "out");
    let fs = Fs::new(s, &FsOptions::default()).unwrap();
    let sub = fs.lookup(ROOT_INO, OsStr::new("sub")).unwrap().ino;
    let target = |dir: u64, name: &str| {
        let a = fs.lookup(dir, OsStr::new(name)).unwrap();
        assert_eq!(a.kind, Kind::Symlink, "{name}");
        let t = fs.readlink(a.ino).unwrap();
        assert_eq!(
            a.size,
            t.len() as u64,
            "{name}: size is the target's length"
        );
        String::from_utf8(t).unwrap()
    };
    assert_eq!(target(ROOT_INO, "cur"), "data");
    assert_eq!(target(sub, "up"), "../data");
    assert_eq!(target(ROOT_INO, "plain"), "notes.txt");
    assert_eq!(target(ROOT_INO, "abs"), "/etc/data.b2frame");
    assert_eq!(target(ROOT_INO, "gone"), "missing.b2frame");
    assert_eq!(target(ROOT_INO, "out"), "../data.b2frame");
    assert_eq!(target(ROOT_INO, "k"), "kept.b2");
    assert_eq!(target(ROOT_INO, "again"), "cur");
    // The same from the directories' listings, once made.
    fs.readdir(ROOT_INO).unwrap();
    fs.readdir(sub).unwrap();
    assert_eq!(target(ROOT_INO, "cur"), "data");
    assert_eq!(target(sub, "up"), "../data");
    assert_eq!(target(ROOT_INO, "k"), "kept.b2");
    // The rewritten names are found, as the container, where they point.
    let data = fs.lookup(ROOT_INO, OsStr::new("data")).unwrap();
    assert_eq!(data.kind, Kind::File);
    assert_ne!(
        data.size,
        std::fs::metadata(s.join("data.b2frame")).unwrap().len()
    );
}

/// A directory read in many small requests is listed from the source once
/// (at `opendir`), gives every entry once and in order, and keeps its
/// offsets while the source directory changes; reading from offset 0 again
/// (`rewinddir`) sees the change.
#[test]
fn a_directory_read_in_small_requests_is_listed_once() {
    let dir = tempfile::tempdir().unwrap();
    const N: usize = 5_000;
    for i in 0..N {
        std::fs::write(dir.path().join(format!("f{i:05}")), b"").unwrap();
    }
    let fs = Fs::new(dir.path(), &FsOptions::default()).unwrap();
    let fh = fs.opendir(ROOT_INO).unwrap();
    let built = fs.listings_built();
    let read_all = |fs: &Fs, per: usize, mut during: Box<dyn FnMut(usize) + '_>| {
        let (mut names, mut off) = (Vec::new(), 0);
        loop {
            let mut got = 0;
            fs.readdir_at(fh, off, false, |e| {
                if got == per {
                    return true;
                }
                names.push(e.name.to_string_lossy().into_owned());
                off = e.next;
                got += 1;
                false
            })
            .unwrap();
            if got == 0 {
                return names;
            }
            during(names.len());
        }
    };
    let mut changed = false;
    let names = read_all(
        &fs,
        37,
        Box::new(|n| {
            if n >= 1_000 && !std::mem::replace(&mut changed, true) {
                // The source directory changes, and the listing's TTL passes.
                std::fs::write(dir.path().join("a-new-file"), b"").unwrap();
                std::fs::remove_file(dir.path().join("f04000")).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(1100));
            }
        }),
    );
    assert_eq!(fs.listings_built(), built, "the listing was built again");
    let expected: Vec<String> = [".".to_string(), "..".to_string()]
        .into_iter()
        .chain((0..N).map(|i| format!("f{i:05}")))
        .collect();
    assert_eq!(names, expected);
    // rewinddir: a fresh listing.
    let again = read_all(&fs, 1_000, Box::new(|_| {}));
    assert!(again.contains(&"a-new-file".to_string()));
    assert!(!again.contains(&"f04000".to_string()));
    assert_eq!(again.len(), N + 2);
    fs.releasedir(fh);
}

/// `readdirplus` gives each entry's attributes, as a lookup would, and
/// counts each entry given as a lookup the kernel will forget.
#[test]
fn readdirplus_gives_attributes_and_counts_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let src = source_with_fixtures(dir.path());
    let fs = Fs::new(&src, &FsOptions::default()).unwrap();
    let fh = fs.opendir(ROOT_INO).unwrap();
    let mut plus = Vec::new();
    fs.readdir_at(fh, 0, true, |e| {
        plus.push((e.name.to_owned(), e.attr.clone().unwrap()));
        false
    })
    .unwrap();
    fs.releasedir(fh);
    assert!(plus.len() > 3);
    let held = fs.nodes_held();
    assert_eq!(held, plus.len() - 2, "each entry but . and .. is a lookup");
    for (name, a) in &plus[2..] {
        let mut looked = fs.lookup(ROOT_INO, name).unwrap();
        // Probing a file reads it, which may move its access time.
        looked.atime = a.atime;
        assert_eq!(&looked, a, "{name:?}");
    }
    for (_, a) in &plus[2..] {
        fs.forget(a.ino, 2);
    }
    assert_eq!(fs.nodes_held(), 0);
}
