//! Reads through [`DirectFile`]: exact in every access mode, failing once
//! the file is not the version opened, and bypassing the page cache for
//! exactly the reads the container's policy lets through.

use super::*;
use blosc_decode::Env;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;

/// `n` pseudo-random bytes.
fn random_bytes(n: usize, x: &mut u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            *x as u8
        })
        .collect()
}

/// A file of `n` pseudo-random bytes in a new temporary directory (on a
/// disk file system `O_DIRECT` works; tmpfs may refuse it, and then
/// the reads fall back to the page cache).
fn file(n: usize) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    let data = random_bytes(n, &mut 0x2545_F491_4F6C_DD1Du64);
    std::fs::File::create(&p).unwrap().write_all(&data).unwrap();
    (dir, p, data)
}

fn open(p: &Path) -> DirectFile {
    DirectFile::new(FileSource::open(p).unwrap())
}

/// Every access mode returns the file's bytes, at aligned and unaligned
/// offsets and lengths, up to and at the end of a file whose length is
/// not a multiple of the alignment; the scratch buffer is reused.
#[test]
fn read_span_is_exact_in_every_mode() {
    let n = 3 * 65536 + 1234;
    let (_d, p, data) = file(n);
    let src = open(&p);
    let direct_possible = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&p)
        .is_ok();
    let mut scratch = Vec::new();
    let cases = [
        (0, 4096),
        (0, n),
        (1, 4095),
        (4095, 2),
        (4096, 65536),
        (12345, 100_000),
        (n as u64 - 1, 1),
        (n as u64 - 5000, 5000),
        (65536 * 3, 1234),
        (7, 0),
    ];
    for access in [Access::Buffered, Access::Auto, Access::Direct] {
        let mut bypassed = 0;
        for &(off, len) in &cases {
            let (got, direct) = src.read_span(off, len, access, &mut scratch).unwrap();
            assert_eq!(
                &got[..],
                &data[off as usize..off as usize + len],
                "{access:?} {off}+{len}"
            );
            bypassed += direct as usize;
        }
        match access {
            Access::Buffered => assert_eq!(bypassed, 0),
            Access::Direct if direct_possible => assert_eq!(bypassed, cases.len()),
            _ => {}
        }
    }
}

/// Ranges past the end are refused before anything is allocated, and a
/// file truncated after opening gives an error, in the modes that may
/// bypass the page cache (the buffered one is `FileSource`'s own).
#[test]
fn read_span_past_the_end_and_truncated_underneath() {
    const MODES: [Access; 2] = [Access::Auto, Access::Direct];
    let (_d, p, _) = file(100_000);
    let src = open(&p);
    let mut scratch = Vec::new();
    for access in MODES {
        let huge = src.read_span(90_000, usize::MAX / 2, access, &mut scratch);
        assert_eq!(huge.unwrap_err().kind, blosc_decode::ErrorKind::Truncated);
        assert!(scratch.capacity() < 1 << 20);
    }
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(50_000).unwrap();
    // Every read fails, also of the part the file still has.
    let cases = [(40_000, 40_000), (0, 4096)].into_iter();
    for ((off, len), access) in cases.flat_map(|c| MODES.map(|m| (c, m))) {
        let e = src.read_span(off, len, access, &mut scratch).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("changed since it was opened"), "{access:?}: {e}");
    }
}

/// Does this kernel answer `cachestat(2)` (Linux 6.5+) for `f`, and does
/// the file system take `O_DIRECT`? Only then can `source_io=auto` bypass
/// the page cache.
fn can_bypass_page_cache(p: &std::path::Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(p)
    else {
        return false;
    };
    let range = [0u64, 4096];
    let mut st = [0u64; 5];
    // SAFETY: a range and a result of the kernel's layout (two and five u64).
    unsafe { libc::syscall(451, f.as_raw_fd(), range.as_ptr(), st.as_mut_ptr(), 0u32) == 0 }
}

/// A Blosc1 memcpyed chunk of 32 MiB of random bytes (256 KiB blocks) in
/// `dir`: its path and its bytes. Every block read is 256 KiB of source.
fn memcpyed_chunk(dir: &std::path::Path, mut seed: u64) -> (std::path::PathBuf, Vec<u8>) {
    use std::io::Write;
    let p = dir.join("memcpyed.blosc1");
    let (n, bs) = (32usize << 20, 256u32 << 10);
    let data = random_bytes(n, &mut seed);
    let mut chunk = vec![2u8, 1, 0x02, 1];
    chunk.extend_from_slice(&(n as u32).to_le_bytes());
    chunk.extend_from_slice(&bs.to_le_bytes());
    chunk.extend_from_slice(&(n as u32 + 16).to_le_bytes());
    chunk.extend_from_slice(&data);
    std::fs::File::create(&p)
        .unwrap()
        .write_all(&chunk)
        .unwrap();
    (p, data)
}

/// `source_io=auto`: a random read of a block not in the page cache
/// bypasses it (`O_DIRECT`); the next block, read sequentially, and a block
/// already in the page cache are read through it. Bytes are exact each way.
/// The file is a Blosc1 memcpyed chunk of 32 MiB (256 KiB blocks), so every
/// block read is 256 KiB from the source.
#[test]
fn auto_source_io_bypasses_the_page_cache_for_cold_random_blocks_only() {
    use std::os::unix::io::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let (p, data) = memcpyed_chunk(dir.path(), 7);
    let bs = 256u32 << 10;
    if !can_bypass_page_cache(&p) {
        eprintln!("skipped: no cachestat(2) or no O_DIRECT here");
        return;
    }
    let env = Env::new(64 << 20);
    let c = crate::local::open_path(&p, &env).unwrap().unwrap();
    let f = std::fs::File::open(&p).unwrap();
    let direct = || env.stats.source_direct_reads.load(Relaxed);
    // Written just now: in the page cache. Push it out (clean pages go).
    f.sync_all().unwrap();
    // SAFETY: plain advice on an open descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let mut buf = vec![0u8; 4096];
    let at = 20 << 20;
    assert_eq!(c.read_at(at + 5, &mut buf).unwrap(), 4096);
    assert_eq!(buf, data[at as usize + 5..at as usize + 5 + 4096]);
    assert_eq!(
        direct(),
        1,
        "a cold random block read bypasses the page cache"
    );
    // The next block: a sequential read, through the page cache.
    let next = at + bs as u64;
    assert_eq!(c.read_at(next, &mut buf).unwrap(), 4096);
    assert_eq!(buf, data[next as usize..next as usize + 4096]);
    assert_eq!(direct(), 1, "a sequential block read keeps the page cache");
    // A far block that is in the page cache: read through it.
    let far = 2u64 << 20;
    std::fs::read(&p).unwrap();
    assert_eq!(c.read_at(far, &mut buf).unwrap(), 4096);
    assert_eq!(buf, data[far as usize..far as usize + 4096]);
    assert_eq!(
        direct(),
        1,
        "a block already in the page cache is read from it"
    );
}

/// `source_io=auto`: a cold random read across several blocks still reads
/// them bypassing the page cache. Announcing a request's blocks
/// (`Source::will_read`) must not have the kernel read them into it, or
/// the reads would find the range cached, go through the page cache and
/// wait for that read.
#[test]
fn announcing_a_cold_read_s_blocks_keeps_them_out_of_the_page_cache() {
    use std::os::unix::io::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let (p, data) = memcpyed_chunk(dir.path(), 11);
    assert!(
        can_bypass_page_cache(&p),
        "this test needs cachestat(2) and O_DIRECT"
    );
    let env = Env::new(64 << 20);
    let c = crate::local::open_path(&p, &env).unwrap().unwrap();
    let f = std::fs::File::open(&p).unwrap();
    f.sync_all().unwrap();
    // SAFETY: plain advice on an open descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    // Three blocks: the end of one, a whole one, the start of the next.
    let at = (20u64 << 20) + 5;
    let mut buf = vec![0u8; 600 << 10];
    assert_eq!(c.read_at(at, &mut buf).unwrap(), buf.len());
    assert_eq!(buf, data[at as usize..at as usize + buf.len()]);
    assert!(
        env.stats.source_direct_reads.load(Relaxed) >= 1,
        "the cold blocks were read through the page cache"
    );
}
