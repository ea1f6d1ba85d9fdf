//! `.npy` reads of b2nd arrays whose blocks are narrower than a row (each
//! C-order row crosses many blocks): a sequential read decodes each block a
//! bounded number of times, reads the source about once, and holds bounded
//! memory. Arrays written by python-blosc2 (`tests/fixtures/writers/narrow`,
//! see `gen.py` there); element `i` of each holds `float32(i)`.

use crate::common;
use crate::common::pooled;
use blosc_decode::deferred::PENDING_MAX;
use blosc_decode::{open_path_with, Container, Deferred, Env};
use sha2::{Digest, Sha256};
use std::sync::atomic::Ordering;
use std::sync::Arc;

const NAMES: [&str; 3] = [
    "narrow-600x500-b200x5.b2nd",
    "medium-600x500-b20x50.b2nd",
    "narrow3d-40x60x50-b10x7x5.b2nd",
];

/// A FUSE read request's size.
const REQ: usize = 128 << 10;

struct Array {
    path: std::path::PathBuf,
    shape: Vec<u64>,
    chunks: Vec<u64>,
    blocks: Vec<u64>,
    sha256: String,
}

fn array(name: &str) -> Array {
    let dir = common::fixture("writers/narrow");
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let a = &v["arrays"][name];
    let dims = |k: &str| -> Vec<u64> {
        a[k].as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    Array {
        path: dir.join(name),
        shape: dims("shape"),
        chunks: dims("chunks"),
        blocks: dims("blocks"),
        sha256: a["npy_sha256"].as_str().unwrap().to_string(),
    }
}

impl Array {
    /// Bytes of one padded chunk row: the chunks sharing a first index, each
    /// padded to whole blocks (what a sequential reader works through at once).
    fn chunk_row_bytes(&self) -> u64 {
        let mut n = 4 * self.chunks[0].div_ceil(self.blocks[0]) * self.blocks[0];
        for k in 1..self.shape.len() {
            let ext = self.chunks[k].div_ceil(self.blocks[k]) * self.blocks[k];
            n *= self.shape[k].div_ceil(self.chunks[k]) * ext;
        }
        n
    }

    /// Blocks stored (every one holds array elements in these arrays).
    fn nblocks(&self) -> u64 {
        (0..self.shape.len())
            .map(|k| {
                self.shape[k].div_ceil(self.chunks[k]) * self.chunks[k].div_ceil(self.blocks[k])
            })
            .product()
    }

    fn nelems(&self) -> u64 {
        self.shape.iter().product()
    }

    fn open(&self, cache: u64, workers: usize) -> (Env, Container) {
        let env = pooled(cache, workers);
        let c = open_path_with(&self.path, &env).unwrap().unwrap();
        (env, c)
    }

    /// Check a whole `.npy` read: the data part element by element, the
    /// whole file against numpy's.
    fn check(&self, npy: &[u8]) {
        let data = 4 * self.nelems() as usize;
        let head = npy.len() - data;
        for (i, v) in npy[head..].chunks_exact(4).enumerate() {
            let got = f32::from_le_bytes(v.try_into().unwrap());
            assert_eq!(got, i as f32, "element {i}");
        }
        let numpy = crate::common::as_numpy_saves(npy);
        assert_eq!(format!("{:x}", Sha256::digest(numpy)), self.sha256);
    }
}

fn count(c: &std::sync::atomic::AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// Read `buf.len()` bytes at `off` as the FUSE adapter does (the work that
/// can wait run after); also returns the most bytes of deferred work held.
fn read_deferring(c: &Container, off: u64, buf: &mut [u8]) -> (usize, usize) {
    let mut later = Deferred::new();
    let n = c.read_at_deferring(off, buf, &mut later).unwrap();
    later.run();
    (n, later.peak())
}

/// Read the whole file in `REQ` requests, each as the FUSE adapter serves
/// it; also returns the number of requests and the most bytes of deferred
/// work one held.
fn read_seq(c: &Container) -> (Vec<u8>, u64, usize) {
    let mut all = vec![0u8; c.len() as usize];
    let (mut reqs, mut peak) = (0, 0);
    for piece in all.chunks_mut(REQ) {
        let off = reqs * REQ as u64;
        let (n, p) = read_deferring(c, off, piece);
        assert_eq!(n, piece.len());
        peak = peak.max(p);
        reqs += 1;
    }
    (all, reqs, peak)
}

/// The case, scaled down: with a cache of one chunk row, reading
/// the `.npy` in 128 KiB requests decodes each block at most twice (it was
/// decoded for every row of it each request touched: 42,264 decodes of 400
/// blocks), reads the source about once, and defers no work per run.
#[test]
fn a_sequential_read_decodes_each_block_at_most_twice() {
    for name in NAMES {
        let a = array(name);
        let (env, c) = a.open(a.chunk_row_bytes(), 0);
        let (npy, _, peak) = read_seq(&c);
        a.check(&npy);
        let st = &env.stats;
        let decoded = count(&st.blocks_decoded);
        assert!(
            decoded <= 2 * a.nblocks(),
            "{name}: {decoded} decodes of {} blocks",
            a.nblocks()
        );
        let file = std::fs::metadata(&a.path).unwrap().len();
        let read = count(&st.source_bytes_read);
        assert!(
            read <= file + file / 4,
            "{name}: read {read} of {file} bytes"
        );
        assert_eq!(count(&st.bytes_served), 4 * a.nelems(), "{name}");
        assert!(peak <= 2 * 4096, "{name}: {peak} bytes of deferred work");
        assert!(env.cache.bytes() <= env.cache.budget());
    }
}

/// With a cache that holds the array, each block is decoded exactly once,
/// with or without the pool decoding a request's other blocks in parallel.
#[test]
fn a_sequential_read_with_a_large_cache_decodes_each_block_once() {
    for name in NAMES {
        let a = array(name);
        for workers in [0, 2] {
            let (env, c) = a.open(64 << 20, workers);
            let (npy, _, _) = read_seq(&c);
            a.check(&npy);
            while env.ahead.in_flight() > 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let decoded = count(&env.stats.blocks_decoded);
            assert_eq!(decoded, a.nblocks(), "{name}, {workers} workers");
        }
    }
}

/// A cache far smaller than a chunk row: each request decodes each block it
/// touches once at most, and memory stays within the cache.
#[test]
fn a_cache_smaller_than_a_chunk_row_costs_a_decode_per_block_and_request() {
    for name in NAMES {
        let a = array(name);
        let (env, c) = a.open(32 << 10, 0);
        let (npy, reqs, peak) = read_seq(&c);
        a.check(&npy);
        // A request spans at most two block rows (it is smaller than one)
        // of up to a chunk row's blocks each.
        let row_blocks = a.nblocks() / a.shape[0].div_ceil(a.chunks[0]);
        let decoded = count(&env.stats.blocks_decoded);
        assert!(
            decoded <= reqs * 2 * row_blocks,
            "{name}: {decoded} decodes in {reqs} requests"
        );
        assert!(peak <= PENDING_MAX);
        assert!(env.cache.bytes() <= env.cache.budget());
    }
}

/// Random reads of any size from several threads, the pool on and a cache
/// that keeps evicting: every byte as numpy has it, and no thread ever
/// holds more deferred work than allowed.
#[test]
fn random_reads_from_threads_are_exact() {
    let arrays: Vec<_> = NAMES.iter().map(|n| array(n)).collect();
    let env = pooled(96 << 10, 2);
    let files: Arc<Vec<(Container, Vec<u8>)>> = Arc::new(
        arrays
            .iter()
            .map(|a| {
                let c = open_path_with(&a.path, &env).unwrap().unwrap();
                let (npy, _, _) = read_seq(&c);
                a.check(&npy);
                (c, npy)
            })
            .collect(),
    );
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let files = files.clone();
            std::thread::spawn(move || {
                let mut seed = 0x2545_f491_4f6c_dd1du64 ^ (t << 32);
                let mut next = || {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed
                };
                let mut peak = 0;
                for _ in 0..300 {
                    let (c, npy) = &files[(next() % files.len() as u64) as usize];
                    let len = [1, 3, 100, 4096, 20_000, REQ][(next() % 6) as usize];
                    let off = next() % npy.len() as u64;
                    let mut buf = vec![0u8; len];
                    let (n, p) = read_deferring(c, off, &mut buf);
                    peak = peak.max(p);
                    let want = len.min(npy.len() - off as usize);
                    assert_eq!(n, want);
                    assert_eq!(&buf[..n], &npy[off as usize..off as usize + n], "at {off}");
                }
                assert!(peak <= PENDING_MAX);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(env.cache.bytes() <= env.cache.budget());
}
