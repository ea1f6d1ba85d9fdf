//! Decoding ahead of sequential readers: spans decoded once by the pool
//! and answered from, exact bytes under eviction and damage, and what the
//! automatic policy does with two CPUs and with eight.

use crate::common;
use crate::container::{decoded, open_all, xorshift};
use blosc_decode::{open_path_with, DecodeAhead, Deferred, Env, Served, Stream};
use common::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// `blocks-lz4.b2frame` opened with a pool of `workers`, decoding ahead as
/// `setting` says in spans of `span` bytes; its reference bytes.
fn ahead_of(
    workers: usize,
    setting: DecodeAhead,
    span: u64,
) -> (Env, Arc<blosc_decode::Container>, Vec<u8>) {
    let mut env = pooled(64 << 20, workers);
    env.decode_ahead = setting;
    env.span = span;
    let c = open_path_with(&fixture("frame/blocks-lz4.b2frame"), &env)
        .unwrap()
        .unwrap();
    (
        env,
        Arc::new(c),
        reference_bytes("frame/blocks-lz4.b2frame"),
    )
}

/// Wait until the pool has nothing queued or running.
fn idle(env: &Env) {
    while env.ahead.in_flight() > 0 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn sequential_readers_with_decode_ahead_and_constant_eviction_read_exact_bytes() {
    let names = [
        "frame/blocks-lz4.b2frame",
        "frame/blocks-delta.b2frame",
        "b2nd/array1-2d.b2nd",
        "frame/zstd-dict.b2frame",
    ];
    // Decode-ahead on (two workers, 64 KiB spans) and a cache smaller than
    // what it would queue.
    let mut env = pooled(192 << 10, 2);
    env.decode_ahead = DecodeAhead::Fixed(1 << 20);
    env.span = 64 << 10;
    let files = open_all(&names, &env);
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let files = files.clone();
            let env = env.clone();
            std::thread::spawn(move || {
                let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (t << 40);
                let mut next = || xorshift(&mut seed);
                for _ in 0..12 {
                    let (c, whole) = &files[(next() % files.len() as u64) as usize];
                    // Walk forward from a random start in requests of
                    // varying size, as `cat` or the kernel's read-ahead would.
                    let mut off = next() % (whole.len() as u64 / 2);
                    let stream = Stream::new();
                    while (off as usize) < whole.len() {
                        let len =
                            [4096usize, 65_536, 131_072, 1 << 20, 77_777][(next() % 5) as usize];
                        let mut buf = vec![0u8; len];
                        let r = c
                            .read_shared(&stream, off, &mut buf, &mut Deferred::new())
                            .unwrap();
                        let got = r.bytes(&buf);
                        let n = got.len();
                        assert_eq!(n, len.min(whole.len() - off as usize));
                        assert_eq!(got, &whole[off as usize..off as usize + n], "at {off}");
                        assert!(env.cache.bytes() <= env.cache.budget());
                        off += n as u64;
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(env.cache.bytes() <= env.cache.budget());
}

/// A sequential reader's spans are decoded ahead by the pool, each once,
/// and the reads after the first span are answered from them (without a
/// copy when they fall in one); every block is decoded once overall, and
/// spans read through leave the cache.
#[test]
fn a_sequential_reader_gets_its_next_spans_decoded_ahead_once() {
    let (env, c, whole) = ahead_of(2, DecodeAhead::Fixed(1 << 20), 256 << 10);
    let block = c.layout(0).unwrap().header.blocksize as u64;
    assert_eq!((256 << 10) % block, 0, "spans of whole blocks");
    let spans = (whole.len() as u64).div_ceil(256 << 10);
    let wait = || idle(&env);
    let count = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let stream = Stream::new();
    // The first request: span 0 decoded here, the next four queued.
    let mut buf = vec![0u8; 64 << 10];
    let r = c
        .read_shared(&stream, 0, &mut buf, &mut Deferred::none())
        .unwrap();
    assert!(matches!(r, Served::Buf(n) if n == buf.len()));
    assert_eq!(buf, whole[..64 << 10]);
    wait();
    assert_eq!(count(&env.stats.spans_decoded), 4);
    // The rest, sequentially, each read once the pool is idle (a span still
    // queued when its reader gets there is decoded by the reader instead).
    let (mut off, mut shared) = (buf.len(), 0);
    while off < whole.len() {
        wait();
        let r = c
            .read_shared(&stream, off as u64, &mut buf, &mut Deferred::none())
            .unwrap();
        let got = r.bytes(&buf);
        assert_eq!(got, &whole[off..off + got.len()]);
        if let Served::Shared(b, _) = &r {
            shared += 1;
            env.cache.recycle(b.clone());
        }
        off += got.len();
    }
    wait();
    assert_eq!(count(&env.stats.spans_decoded), spans - 1);
    assert_eq!(
        count(&env.stats.span_bytes_served),
        whole.len() as u64 - (256 << 10)
    );
    assert_eq!(shared, (whole.len() - (256 << 10)).div_ceil(64 << 10));
    assert_eq!(decoded(&env), (whole.len() as u64).div_ceil(block));
    assert_eq!(env.cache.bytes(), 0, "spans read through left the cache");
}

/// Two readers of one file at different places, their reads interleaved,
/// are each sequential: both get their spans decoded ahead, each span once.
#[test]
fn readers_of_one_file_at_two_places_are_each_decoded_ahead() {
    let (env, c, whole) = ahead_of(2, DecodeAhead::Fixed(512 << 10), 128 << 10);
    let half = (whole.len() / 2) as u64 / (128 << 10) * (128 << 10);
    let wait = || idle(&env);
    let (a, b) = (Stream::new(), Stream::new());
    let mut at = [0u64, half];
    let mut buf = vec![0u8; 32 << 10];
    while at[0] < half || (at[1] as usize) < whole.len() {
        for (i, s) in [&a, &b].into_iter().enumerate() {
            let end = if i == 0 { half } else { whole.len() as u64 };
            if at[i] >= end {
                continue;
            }
            wait();
            let r = c
                .read_shared(s, at[i], &mut buf, &mut Deferred::none())
                .unwrap();
            let got = r.bytes(&buf);
            let o = at[i] as usize;
            assert_eq!(got, &whole[o..o + got.len()], "reader {i} at {o}");
            at[i] += got.len() as u64;
        }
    }
    wait();
    let spans = (whole.len() as u64).div_ceil(128 << 10);
    // All but the first span of each reader; reader a's last spans reach
    // into b's part, which b has read: up to its four spans ahead are
    // decoded again there (the page cache may no longer hold them).
    let decoded = env.stats.spans_decoded.load(Ordering::Relaxed);
    assert!(
        (spans - 2..=spans - 2 + 4).contains(&decoded),
        "{decoded} of {spans}"
    );
}

/// Reads that jump are not sequential: nothing is decoded ahead of them.
#[test]
fn random_reads_decode_nothing_ahead() {
    let (env, c, whole) = ahead_of(2, DecodeAhead::Fixed(1 << 20), 64 << 10);
    let mut buf = vec![0u8; 4096];
    let mut seed = 7u64;
    let stream = Stream::new();
    for _ in 0..50 {
        let off = xorshift(&mut seed) % (whole.len() as u64 - 4096);
        let r = c
            .read_shared(&stream, off, &mut buf, &mut Deferred::none())
            .unwrap();
        assert_eq!(r.bytes(&buf), &whole[off as usize..off as usize + 4096]);
    }
    assert_eq!(env.stats.spans_decoded.load(Ordering::Relaxed), 0);
    assert_eq!(env.ahead.readers.active(std::time::Instant::now()), 0);
}

/// On two CPUs the automatic policy decodes nothing ahead of one reader:
/// both cores are busy with its own requests.
#[test]
fn the_automatic_policy_leaves_two_cpus_to_the_reader() {
    let (env, c, whole) = ahead_of(2, DecodeAhead::Auto, 64 << 10);
    let mut buf = vec![0u8; 64 << 10];
    let stream = Stream::new();
    let mut off = 0;
    while off < whole.len() {
        let r = c
            .read_shared(&stream, off as u64, &mut buf, &mut Deferred::none())
            .unwrap();
        off += r.bytes(&buf).len();
    }
    assert_eq!(env.stats.spans_decoded.load(Ordering::Relaxed), 0);
    // With eight, the idle six decode ahead.
    let (env, c, _) = ahead_of(8, DecodeAhead::Auto, 64 << 10);
    let (stream, mut off) = (Stream::new(), 0);
    while off < whole.len() {
        // Each read once the pool is idle: every span queued gets decoded.
        idle(&env);
        let r = c
            .read_shared(&stream, off as u64, &mut buf, &mut Deferred::none())
            .unwrap();
        assert_eq!(r.bytes(&buf), &whole[off..off + r.bytes(&buf).len()]);
        off += r.bytes(&buf).len();
    }
    let spans = (whole.len() as u64).div_ceil(64 << 10);
    assert_eq!(env.stats.spans_decoded.load(Ordering::Relaxed), spans - 1);
}

#[test]
fn decode_ahead_does_not_hide_a_damaged_block() {
    let dir = tempfile::tempdir().unwrap();
    let p = damaged_copy(dir.path());
    let probe = open_path_with(&fixture("frame/blocks-lz4.b2frame"), &Env::default())
        .unwrap()
        .unwrap();
    let mut env = pooled(16 << 20, 2);
    env.decode_ahead = DecodeAhead::Fixed(4 << 20);
    env.span = 64 << 10;
    let c = Arc::new(open_path_with(&p, &env).unwrap().unwrap());
    let whole = reference_bytes("frame/blocks-lz4.b2frame");
    let chunk = probe.chunks()[1].uoff as usize;
    let chunk_end = chunk + probe.chunks()[1].ulen as usize;
    // Read forward in 64 KiB requests: the pool meets the damage first.
    let mut buf = vec![0u8; 64 << 10];
    let stream = Stream::new();
    let mut failed = 0;
    let mut off = 0;
    while off < whole.len() {
        match c.read_shared(&stream, off as u64, &mut buf, &mut Deferred::none()) {
            Ok(r) => {
                let got = r.bytes(&buf);
                assert_eq!(got, &whole[off..off + got.len()]);
            }
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains("damaged.b2frame") && e.contains("chunk 1"),
                    "{e}"
                );
                assert!(off >= chunk && off < chunk_end, "error at {off}");
                failed += 1;
            }
        }
        off += buf.len();
    }
    assert!(failed >= 1);
}

/// `Env::default()` has no pool: a sequential reader asking for decoding
/// ahead gets its bytes decoded by its own reads, none ahead, and no
/// thread is started for it.
#[test]
fn the_default_env_decodes_nothing_ahead() {
    let env = Env {
        decode_ahead: DecodeAhead::Fixed(1 << 20),
        span: 256 << 10,
        ..Env::default()
    };
    assert_eq!(env.ahead.workers(), 0);
    let c = Arc::new(
        open_path_with(&fixture("frame/blocks-lz4.b2frame"), &env)
            .unwrap()
            .unwrap(),
    );
    let whole = reference_bytes("frame/blocks-lz4.b2frame");
    let stream = Stream::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut off = 0;
    while off < whole.len() {
        let r = c
            .read_shared(&stream, off as u64, &mut buf, &mut Deferred::none())
            .unwrap();
        let got = r.bytes(&buf);
        assert_eq!(got, &whole[off..off + got.len()]);
        off += got.len();
        // Whatever a pool would have been given, it has finished.
        idle(&env);
        assert_eq!(env.stats.spans_decoded.load(Ordering::Relaxed), 0);
    }
}
