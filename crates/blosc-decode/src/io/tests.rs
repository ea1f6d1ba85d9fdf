//! Reads from local files: exact, through the page cache whatever the
//! access asked, and failing once the file is not the version opened.

use super::*;
use std::io::Write;
use std::path::PathBuf;

/// A file of `n` pseudo-random bytes in a new temporary directory.
fn file(n: usize) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let data: Vec<u8> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::File::create(&p).unwrap().write_all(&data).unwrap();
    (dir, p, data)
}

/// Every access mode returns the file's bytes, at aligned and unaligned
/// offsets and lengths, up to and at the end of the file; the scratch
/// buffer is reused; the page cache is never bypassed.
#[test]
fn read_span_is_exact_in_every_mode() {
    let n = 3 * 65536 + 1234;
    let (_d, p, data) = file(n);
    let src = FileSource::open(&p).unwrap();
    let mut scratch = Vec::new();
    // Whole, unaligned, the last byte, nothing.
    let cases = [(0, n), (12345, 100_000), (n as u64 - 1, 1), (7, 0)];
    for access in [Access::Buffered, Access::Auto, Access::Direct] {
        for &(off, len) in &cases {
            let (got, direct) = src.read_span(off, len, access, &mut scratch).unwrap();
            assert_eq!(
                &got[..],
                &data[off as usize..off as usize + len],
                "{access:?} {off}+{len}"
            );
            assert!(!direct);
        }
    }
}

/// Ranges past the end are refused before anything is allocated, and a
/// file truncated after opening gives an error in every mode.
#[test]
fn read_span_past_the_end_and_truncated_underneath() {
    let (_d, p, _) = file(100_000);
    let src = FileSource::open(&p).unwrap();
    let mut scratch = Vec::new();
    for access in [Access::Buffered, Access::Auto, Access::Direct] {
        let e = src
            .read_span(90_000, usize::MAX / 2, access, &mut scratch)
            .unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::Truncated);
        assert!(scratch.capacity() < 1 << 20);
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(50_000)
        .unwrap();
    // Every read fails, also of the part the file still has.
    for (off, len) in [(40_000, 40_000), (0, 4096)] {
        for access in [Access::Buffered, Access::Auto, Access::Direct] {
            let e = src.read_span(off, len, access, &mut scratch).unwrap_err();
            assert!(
                e.to_string().contains("changed since it was opened"),
                "{access:?}: {e}"
            );
            assert_eq!(e.errno(), libc::EIO);
        }
    }
}

/// A file rewritten in place with other bytes of the same size after it
/// was opened: reads fail rather than return the new bytes to be
/// decoded with the old version's offsets.
#[test]
fn a_file_rewritten_in_place_fails_every_read() {
    let (_d, p, data) = file(100_000);
    let src = FileSource::open(&p).unwrap();
    let mut buf = vec![0u8; 4096];
    src.read_exact_at(0, &mut buf).unwrap();
    assert_eq!(buf, data[..4096]);
    // Past the file system's timestamp granularity.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let other: Vec<u8> = data.iter().map(|b| b ^ 0x5a).collect();
    std::fs::write(&p, &other).unwrap();
    let e = src.read_exact_at(0, &mut buf).unwrap_err();
    assert!(e.to_string().contains("changed since it was opened"), "{e}");
    let mut scratch = Vec::new();
    for access in [Access::Buffered, Access::Auto, Access::Direct] {
        assert!(src.read_span(8192, 4096, access, &mut scratch).is_err());
    }
}
