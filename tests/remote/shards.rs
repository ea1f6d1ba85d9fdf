//! A sharded Zarr array from a remote source, written by zarr-python 3
//! (the project's `.venv`) when the test runs: 262144 uint32 (random, so
//! each inner chunk keeps its 16 KiB through zstd) in 2 shards of 32 inner
//! chunks, the index at each shard's end. Once a shard's index is known, a
//! cold random 4 KiB read of the `.npy` inside one inner chunk costs at
//! most one GET (never one for the index again), over plain HTTP (counted by the server) and over S3 (counted by the
//! daemon).

use crate::common::*;
use crate::counts::settled;
use crate::harness::*;
use std::os::unix::fs::FileExt;

const NPY: &str = "sharded.zarr/wide.npy";

const WRITE: &str = r#"
import sys, numpy as np, zarr
from zarr.codecs import ZstdCodec
out = sys.argv[1]
g = zarr.open_group(out + "/sharded.zarr", mode="w")
a = g.create_array("wide", shape=(262144,), chunks=(4096,), shards=(131072,),
                   dtype="u4", compressors=ZstdCodec(level=1))
a[:] = np.random.default_rng(32).integers(0, 2**32, 262144, dtype="u4")
np.save(out + "/wide.npy", zarr.open(out + "/sharded.zarr/wide", mode="r")[...])
"#;

/// Through mount `m`: one read in each shard (its index known), then
/// random page-aligned 4 KiB reads each inside one inner chunk whose
/// neighbours were not read yet, each costing at most one GET by `count`.
fn random_reads(m: &RemoteMount, want: &[u8], count: &dyn Fn() -> u64) {
    let f = std::fs::File::open(m.path(NPY)).unwrap();
    // Page 4g + 2 of the values is inside inner chunk g (16 KiB of values),
    // after a header of one page.
    assert_eq!(want.len(), 4096 + 262144 * 4);
    let read = |g: u64| {
        let off = 4096 + (4 * g + 2) * 4096;
        let mut buf = vec![0u8; 4096];
        f.read_exact_at(&mut buf, off).unwrap();
        assert!(
            buf[..] == want[off as usize..off as usize + 4096],
            "inner chunk {g}"
        );
    };
    // The last inner chunk of each shard, beside its index: the shard's
    // index and the inner chunk, at most 2 GETs (1 when one read-around
    // holds both).
    for g in [31, 63] {
        let before = settled(count);
        read(g);
        let cost = settled(count) - before;
        assert!(cost <= 2, "the first read of shard {}: {cost} GETs", g / 32);
    }
    // Inner chunks 64 KiB and more apart, away from each shard's ends: at
    // most one GET each (none when the source's read-ahead, which takes
    // reads close together in one object for a scan, fetched them).
    let mut total = 0;
    for g in [12, 44, 20, 52, 8, 40] {
        let before = settled(count);
        read(g);
        let cost = settled(count) - before;
        assert!(cost <= 1, "a random read of inner chunk {g}: {cost} GETs");
        total += cost;
    }
    assert!(total >= 2, "the cold reads cost {total} GETs: not cold");
}

#[test]
fn http_random_reads_of_a_sharded_array_cost_one_get() {
    if !fuse_available() {
        return;
    }
    if let Some((dir, want)) = written_by_python(WRITE, "wide.npy") {
        on_http(dir.path(), |m, count| random_reads(m, &want, count));
    }
}

#[test]
fn s3_random_reads_of_a_sharded_array_cost_one_get() {
    if !fuse_available() {
        return;
    }
    if let Some((dir, want)) = written_by_python(WRITE, "wide.npy") {
        on_s3(dir.path(), "shards", |m, count| {
            random_reads(m, &want, count)
        });
    }
}
