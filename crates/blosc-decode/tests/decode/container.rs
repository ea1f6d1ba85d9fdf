//! The read path: only the blocks a range needs are decoded; the cache stays
//! within its budget under concurrent readers; bad input gives clear errors.

use crate::common;
use blosc_decode::{open_path_with, Deferred, Env};
use common::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub(crate) type Opened = Arc<Vec<(Arc<blosc_decode::Container>, Arc<Vec<u8>>)>>;

/// Open fixtures with `env`, each with its reference bytes.
pub(crate) fn open_all(names: &[&str], env: &Env) -> Opened {
    Arc::new(
        names
            .iter()
            .map(|n| {
                (
                    Arc::new(open_path_with(&fixture(n), env).unwrap().unwrap()),
                    Arc::new(reference_bytes(n)),
                )
            })
            .collect(),
    )
}

pub(crate) fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// One fixture opened alone (a cache of 64 MiB, no decode-ahead), with its
/// reference bytes.
fn open_one(name: &str) -> (Env, blosc_decode::Container, Vec<u8>) {
    let env = Env::new(64 << 20);
    let c = open_path_with(&fixture(name), &env).unwrap().unwrap();
    (env, c, reference_bytes(name))
}

pub(crate) fn decoded(env: &Env) -> u64 {
    env.stats.blocks_decoded.load(Ordering::Relaxed)
}

#[test]
fn a_4k_read_in_the_middle_decodes_one_block() {
    let (env, c, whole) = open_one("frame/blocks-lz4.b2frame");
    let mut buf = vec![0u8; 4096];
    let off = 1_500_000; // chunk 1, block 7
    c.read_at(off, &mut buf).unwrap();
    assert_eq!(buf, whole[off as usize..off as usize + 4096]);
    assert_eq!(decoded(&env), 1);
    // Read again: served from the cache.
    c.read_at(off + 100, &mut buf).unwrap();
    assert_eq!(decoded(&env), 1);
    assert!(env.stats.cache_hits.load(Ordering::Relaxed) >= 1);
}

/// A reader that reads on and has had a range is done with every block
/// that ends in it: their buffers are the next ones decoded into (taken
/// out of the cache), the block the range ends inside is not.
#[test]
fn a_range_read_on_is_done_with_each_block_it_ends() {
    let (env, c, _) = open_one("frame/blocks-lz4.b2frame");
    let bs = 65_536u64;
    // Block 2 of chunk 1; a part of each of blocks 1 to 6, each cached whole.
    let base = 1_048_576 + 2 * bs;
    for i in 1..=6 {
        c.read_at(base + (i - 2) * bs + 100, &mut [0u8; 100])
            .unwrap();
    }
    let six = 6 * bs as usize;
    assert_eq!(env.cache.bytes() as usize, six);
    c.done_with(base + 10, base + 4 * bs);
    for taken in 1..=5 {
        let _ = env.cache.buffer(bs as usize);
        let left = six - taken.min(4) * bs as usize;
        assert_eq!(env.cache.bytes() as usize, left, "buffer {taken}");
    }
}

/// As the FUSE adapter reads (with a `Deferred`): a 4 KiB read of a
/// shuffled block gets its bytes before the rest of the block is unshuffled
/// and cached, which happens when the deferred work runs (after the reply).
#[test]
fn a_4k_read_caches_its_block_after_the_reply() {
    let (env, c, whole) = open_one("frame/blocks-lz4.b2frame");
    let hits = || env.stats.cache_hits.load(Ordering::Relaxed);
    let mut buf = vec![0u8; 4096];
    let off = 1_500_000; // chunk 1, block 7
    let mut later = Deferred::new();
    c.read_at_deferring(off, &mut buf, &mut later).unwrap();
    assert_eq!(buf, whole[off as usize..off as usize + 4096]);
    assert_eq!(decoded(&env), 1);
    // Not cached yet: a second read with the same work pending decodes it
    // again.
    c.read_at_deferring(off + 8192, &mut buf, &mut later)
        .unwrap();
    assert_eq!(buf, whole[off as usize + 8192..off as usize + 12288]);
    assert_eq!((decoded(&env), hits()), (2, 0));
    later.run();
    // Cached now, as the whole unshuffled block: every byte of it.
    let bs = 65_536;
    let start = off / bs * bs;
    let mut blk = vec![0u8; bs as usize];
    c.read_at(start, &mut blk).unwrap();
    assert_eq!(blk, whole[start as usize..(start + bs) as usize]);
    assert_eq!((decoded(&env), hits()), (2, 1));
}

#[test]
fn a_4k_read_of_a_delta_chunk_decodes_two_blocks() {
    let (env, c, whole) = open_one("frame/blocks-delta.b2frame");
    let mut buf = vec![0u8; 4096];
    let off = 1_500_000;
    c.read_at(off, &mut buf).unwrap();
    assert_eq!(buf, whole[off as usize..off as usize + 4096]);
    assert_eq!(decoded(&env), 2, "block 0 of the chunk and the block read");
}

#[test]
fn a_row_of_a_2d_array_decodes_only_its_band() {
    // shape (97, 131), chunks (40, 50), blocks (8, 25): row 45 lies in chunk
    // row 1, block row 0 of it; across 131 columns that is 3 chunks x up to
    // 2 blocks = 6 blocks (not the 9 x 10 blocks of the array).
    let (env, c, whole) = open_one("b2nd/array1-2d.b2nd");
    let header = whole.len() - 97 * 131 * 4;
    let row = 45;
    let at = header + row * 131 * 4;
    let mut buf = vec![0u8; 131 * 4];
    c.read_at(at as u64, &mut buf).unwrap();
    assert_eq!(buf, whole[at..at + 131 * 4]);
    assert_eq!(decoded(&env), 6);
}

#[test]
fn many_threads_with_constant_eviction_read_exact_bytes() {
    let names = [
        "frame/blocks-lz4.b2frame",
        "frame/blocks-delta.b2frame",
        "b2nd/array1-2d.b2nd",
        "b2nd/partial.b2nd",
        "frame/zstd-dict.b2frame",
    ];
    // A cache far smaller than the working set (64 KiB blocks).
    let env = per_cpu(256 << 10);
    let files = open_all(&names, &env);
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let files = files.clone();
            let env = env.clone();
            std::thread::spawn(move || {
                let mut seed = 0x1234_5678_9abc_def1u64 ^ (t << 32);
                for _ in 0..400 {
                    xorshift(&mut seed);
                    let (c, whole) = &files[(seed % files.len() as u64) as usize];
                    let off = (seed >> 8) % whole.len() as u64;
                    let len = ((seed >> 40) % 200_000) as usize;
                    let mut buf = vec![0u8; len];
                    // Half the reads as the FUSE adapter does them (the
                    // rest of a partly read block is cached afterwards).
                    let n = if seed & (1 << 20) != 0 {
                        c.read_at_deferring(off, &mut buf, &mut Deferred::new())
                    } else {
                        c.read_at(off, &mut buf)
                    }
                    .unwrap();
                    assert_eq!(n, len.min(whole.len() - off as usize));
                    assert_eq!(&buf[..n], &whole[off as usize..off as usize + n]);
                    assert!(env.cache.bytes() <= env.cache.budget());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(env.cache.bytes() <= env.cache.budget());
}

#[test]
fn corrupt_stream_is_an_error_naming_file_chunk_and_block_and_the_rest_reads() {
    let dir = tempfile::tempdir().unwrap();
    let p = damaged_copy(dir.path());
    let env = per_cpu(16 << 20);
    let c = open_path_with(&p, &env).unwrap().unwrap();
    let whole = reference_bytes("frame/blocks-lz4.b2frame");
    let mut buf = vec![0u8; c.len() as usize];
    let err = c.read_at(0, &mut buf).unwrap_err().to_string();
    assert!(
        err.contains("damaged.b2frame") && err.contains("chunk 1") && err.contains("block"),
        "{err}"
    );
    // Chunks 0 and 2 still read exactly.
    let mut b0 = vec![0u8; 1 << 20];
    c.read_at(0, &mut b0).unwrap();
    assert_eq!(b0, whole[..1 << 20]);
    c.read_at(2 << 20, &mut b0).unwrap();
    assert_eq!(b0, whole[2 << 20..3 << 20]);
}

/// Is the page holding byte `at` of `f` in the page cache?
fn resident(f: &std::fs::File, at: u64) -> bool {
    use std::os::unix::io::AsRawFd;
    let page = 4096u64;
    let len = f.metadata().unwrap().len() as usize;
    // SAFETY: a read-only mapping of a file we hold open, unmapped below;
    // mincore only reports on it.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        let mut v = vec![0u8; len.div_ceil(page as usize)];
        assert_eq!(libc::mincore(p, len, v.as_mut_ptr()), 0);
        libc::munmap(p, len);
        v[(at / page) as usize] & 1 == 1
    }
}

/// A file source's `will_need` has the kernel read the range into the page
/// cache (and nothing else: a page further on stays out). The file is on a
/// disk file system (tmpfs keeps every page resident).
#[test]
fn file_source_will_need_reads_into_the_page_cache() {
    use blosc_decode::io::{FileSource, Source};
    use std::os::unix::io::AsRawFd;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("64M");
    std::fs::write(&path, vec![7u8; 64 << 20]).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: plain syscall on our fd.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let (hinted, other) = (32u64 << 20, 48u64 << 20);
    assert!(
        !resident(&f, hinted) && !resident(&f, other),
        "pages resident after POSIX_FADV_DONTNEED (tmpfs?)"
    );
    FileSource::open(&path).unwrap().will_need(hinted, 8192);
    let t = std::time::Instant::now();
    while !resident(&f, hinted) && t.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!((resident(&f, hinted), resident(&f, other)), (true, false));
}

/// A source that records `will_need` hints.
struct Hinted(
    blosc_decode::io::MemSource,
    std::sync::Mutex<Vec<(u64, u64)>>,
);

impl blosc_decode::io::Source for Hinted {
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> blosc_decode::Result<()> {
        self.0.read_exact_at(offset, buf)
    }
    fn will_need(&self, offset: u64, len: u64) {
        self.1.lock().unwrap().push((offset, len));
    }
}

/// Once the first random read is done, the start (header and block starts)
/// of every chunk not parsed yet is hinted to the source, once, on the
/// pool's chore thread, so each later first read of a chunk waits for one
/// read, not two in a row. The chunk that read parsed is not hinted.
/// Sequential reads (and reads without a pool) hint nothing here (a read
/// across chunks never parsed hints their starts before it reads:
/// `hints.rs`).
#[test]
fn first_random_read_hints_chunk_headers() {
    use blosc_decode::io::MemSource;
    let name = "frame/lz4-none-ts4-c.b2frame";
    let data = std::fs::read(fixture(name)).unwrap();
    let reference = reference_bytes(name);
    // Up to `secs` for `n` hints, then a little more for any stray one.
    let wait_for = |src: &Hinted, n: usize, secs: u64| {
        let t = std::time::Instant::now();
        while src.1.lock().unwrap().len() < n && t.elapsed() < std::time::Duration::from_secs(secs)
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        src.1.lock().unwrap().clone()
    };
    let mut buf = vec![0u8; 4096];
    for (workers, sequential) in [(2, true), (0, false), (2, false)] {
        let src = Arc::new(Hinted(MemSource::new(data.clone()), Default::default()));
        let env = pooled(1 << 20, workers);
        let c = blosc_decode::open_source(src.clone(), std::path::Path::new(name), &env)
            .unwrap()
            .unwrap();
        let starts = crate::hints::chunk_starts(&c);
        assert_eq!(starts.len(), 8);
        let ats: Vec<u64> = if sequential {
            // A scan whose requests arrive a little out of order (as the
            // kernel's read-ahead sends them from two threads): jumps of
            // two requests are not random reads (hints for them would slow
            // the scan).
            vec![0, 16384, 4096, 8192, 28672, 12288, 32768]
        } else {
            vec![c.chunks()[3].uoff + 100, c.chunks()[6].uoff + 5, 50_000]
        };
        for &at in &ats {
            assert_eq!(c.read_at(at, &mut buf).unwrap(), 4096);
            assert_eq!(buf, reference[at as usize..at as usize + 4096]);
        }
        let none = sequential || workers == 0;
        let hints = wait_for(&src, 6, if none { 0 } else { 5 });
        if none {
            assert_eq!(hints, [], "workers {workers}, sequential {sequential}");
            continue;
        }
        // Every chunk not parsed by the first random read (chunk 3), once.
        // Chunk 0 may have been parsed when the container was opened (codec
        // names for `info`).
        let mut got: Vec<u64> = hints.iter().map(|h| h.0).collect();
        got.retain(|&o| o != starts[0]);
        let want: Vec<u64> = [1, 2, 4, 5, 6, 7].iter().map(|&c| starts[c]).collect();
        assert_eq!(got, want);
        // A chunk's first 8 KiB (the last chunk is shorter).
        assert!(
            hints.iter().all(|&(_, len)| len > 0 && len <= 8192),
            "{hints:?}"
        );
    }
}

/// A block larger than an eighth of the cache must still be cached (the
/// shards share one budget rather than an eighth each): else every read
/// touching it decodes it whole again, 512 decodes of 16 MiB to read this
/// 64 MiB file in 128 KiB pieces with `bloscfs cat`'s 64 MiB cache. A block
/// of up to half the budget is kept. The file is python-blosc2's
/// (4.14: `SChunk(chunksize=32 MiB, data=np.arange(2**23), cparams={codec:
/// ZSTD, clevel: 1, typesize: 8, blocksize: 16 MiB})`).
#[test]
fn blocks_of_16_mib_are_decoded_once_with_a_64_mib_cache() {
    let env = Env::new(64 << 20);
    let path = common::root().join("tests/data/blocks-16m.b2frame");
    let c = open_path_with(&path, &env).unwrap().unwrap();
    assert_eq!(c.len(), 64 << 20);
    let mut buf = vec![0u8; 128 << 10];
    for (k, at) in (0..c.len()).step_by(buf.len()).enumerate() {
        assert_eq!(c.read_at(at, &mut buf).unwrap(), buf.len());
        for (j, v) in buf.chunks_exact(8).enumerate() {
            let want = at / 8 + j as u64;
            assert_eq!(u64::from_le_bytes(v.try_into().unwrap()), want, "read {k}");
        }
        assert!(env.cache.bytes() <= env.cache.budget());
    }
    assert_eq!(decoded(&env), 4, "each of the 4 blocks decoded once");
}

/// Zero chunks are holes, for reads (`is_zero`) and for seeking, and
/// nothing else is: chunks of zeros and of NaN alternate here (64 KiB each,
/// 1000 of them, the first zeros).
#[test]
fn zero_chunks_are_holes_and_other_chunks_data() {
    let env = Env::new(1 << 20);
    let name = "regress/frame-alternating-specials-1000.b2frame";
    let c = open_path_with(&fixture(name), &env).unwrap().unwrap();
    let k = 65_536u64;
    let len = c.len();
    assert_eq!(len, 1000 * k);
    let seek = |at: u64, hole: bool| c.seek_hole_or_data(at, hole).unwrap();
    assert_eq!(seek(0, true), Some(0));
    assert_eq!(seek(0, false), Some(k));
    assert_eq!(seek(k + 5, false), Some(k + 5));
    assert_eq!(seek(k + 5, true), Some(2 * k));
    assert_eq!(seek(2 * k + 5, true), Some(2 * k + 5));
    assert_eq!(seek(998 * k + 1, false), Some(999 * k));
    // Past the last hole: the end of the file is one.
    assert_eq!(seek(999 * k + 1, true), Some(len));
    assert!(c.is_zero(0, k) && c.is_zero(2 * k + 100, 4096));
    assert!(!c.is_zero(0, k + 1) && !c.is_zero(k, 1) && !c.is_zero(len - 1, 2));
    // Only zeros: no data from any offset.
    let z = open_path_with(&fixture("frame/special-zero.b2frame"), &env)
        .unwrap()
        .unwrap();
    assert_eq!(z.seek_hole_or_data(7, false).unwrap(), None);
    assert_eq!(z.seek_hole_or_data(7, true).unwrap(), Some(7));
    // A `.npy` view does not map linearly onto chunks: all data.
    let a = open_path_with(&fixture("b2nd/partial.b2nd"), &env)
        .unwrap()
        .unwrap();
    assert_eq!(a.seek_hole_or_data(200, false).unwrap(), Some(200));
    assert_eq!(a.seek_hole_or_data(200, true).unwrap(), Some(a.len()));
}
