//! Zarr arrays without shards from a remote source, written by
//! zarr-python 3 (the project's `.venv`) when the test runs: 524288
//! random uint32 in 4 chunks of 512 KiB, once with zstd and once with the
//! blosc codec (16 KiB blocks). A chunk's object is found by its key and
//! fetched whole with its open: a cold 4 KiB read inside a zstd chunk or a
//! Blosc chunk costs one GET, as zarr-python's read of the chunk does (the
//! Blosc chunk is still decoded only in the blocks read). A sequential
//! reader fetches each chunk it comes to in one GET. Over plain HTTP with
//! a manifest (counted by the server) and over S3, where the object is
//! asked for by its key (counted by the daemon).

use crate::common::*;
use crate::counts::settled;
use crate::harness::*;
use std::os::unix::fs::FileExt;

const WRITE: &str = r#"
import sys, numpy as np, zarr
from zarr.codecs import BloscCodec, ZstdCodec
out = sys.argv[1]
v = np.random.default_rng(33).integers(0, 2**32, 524288, dtype="u4")
for name, c in [("zstd", ZstdCodec(level=1)),
                ("blosc", BloscCodec(cname="zstd", clevel=1, shuffle="shuffle",
                                     typesize=4, blocksize=16384))]:
    a = zarr.create_array(out + "/" + name + ".zarr", shape=(524288,), chunks=(131072,),
                          dtype="u4", compressors=c)
    a[:] = v
np.save(out + "/values.npy", zarr.open(out + "/zstd.zarr", mode="r")[...])
"#;

/// Through mount `m`: for each array, one cold 4 KiB read inside each
/// chunk, away from its ends, each costing at most one GET by `count`.
fn cold_reads(m: &RemoteMount, want: &[u8], count: &dyn Fn() -> u64) {
    // The header is one page.
    assert_eq!(want.len(), 4096 + 524288 * 4);
    for npy in ["zstd.npy", "blosc.npy"] {
        let f = std::fs::File::open(m.path(npy)).unwrap();
        let mut total = 0;
        for k in [2u64, 0, 3, 1] {
            // Page 50 of chunk k's 128 pages.
            let off = 4096 + (k * 128 + 50) * 4096;
            let before = settled(count);
            let mut buf = vec![0u8; 4096];
            f.read_exact_at(&mut buf, off).unwrap();
            let cost = settled(count) - before;
            assert!(
                buf[..] == want[off as usize..off as usize + 4096],
                "{npy}: chunk {k}"
            );
            assert!(cost <= 1, "{npy}: a cold read in chunk {k}: {cost} GETs");
            total += cost;
        }
        assert!(
            total >= 4,
            "{npy}: the cold reads cost {total} GETs: not cold"
        );
    }
}

#[test]
fn http_cold_reads_of_zarr_chunks_fetch_what_they_need_first() {
    if !fuse_available() {
        return;
    }
    if let Some((dir, want)) = written_by_python(WRITE, "values.npy") {
        on_http(dir.path(), |m, count| cold_reads(m, &want, count));
    }
}

#[test]
fn s3_cold_reads_of_zarr_chunks_fetch_what_they_need_first() {
    if !fuse_available() {
        return;
    }
    if let Some((dir, want)) = written_by_python(WRITE, "values.npy") {
        on_s3(dir.path(), "zgets", |m, count| cold_reads(m, &want, count));
    }
}

/// Through mount `m`: `blosc.npy` read from its start to its end in
/// 128 KiB reads, as `cat` does: each chunk is fetched whole, one GET,
/// the first one too (fetching each Blosc chunk's header and block offsets
/// first, then its blocks as the kernel's read-ahead asks for them, cost
/// 20 GETs over S3 and 43 over HTTP).
fn sequential_read(m: &RemoteMount, want: &[u8], count: &dyn Fn() -> u64) {
    let f = std::fs::File::open(m.path("blosc.npy")).unwrap();
    let before = settled(count);
    let mut got = vec![0u8; want.len()];
    for (i, part) in got.chunks_mut(128 << 10).enumerate() {
        f.read_exact_at(part, (i as u64) << 17).unwrap();
    }
    let cost = settled(count) - before;
    assert!(got == want, "blosc.npy read sequentially");
    assert!(
        cost == 4,
        "a sequential read of 4 Blosc chunks: {cost} GETs"
    );
}

#[test]
fn http_a_sequential_reader_fetches_each_blosc_chunk_whole() {
    if !fuse_available() {
        return;
    }
    if let Some((dir, want)) = written_by_python(WRITE, "values.npy") {
        on_http(dir.path(), |m, count| sequential_read(m, &want, count));
    }
}

#[test]
fn s3_a_sequential_reader_fetches_each_blosc_chunk_whole() {
    if !fuse_available() {
        return;
    }
    if let Some((dir, want)) = written_by_python(WRITE, "values.npy") {
        on_s3(dir.path(), "zseq", |m, count| {
            sequential_read(m, &want, count)
        });
    }
}

const ROWS: &str = r#"
import sys, numpy as np, zarr
from zarr.codecs import ZstdCodec
out = sys.argv[1]
a = zarr.create_array(out + "/rows.zarr", shape=(16, 4096), chunks=(16, 1024),
                      dtype="u4", compressors=ZstdCodec(level=1))
a[:] = np.random.default_rng(34).integers(0, 2**32, (16, 4096), dtype="u4")
np.save(out + "/rows.npy", zarr.open(out + "/rows.zarr", mode="r")[...])
"#;

/// A 2-D array whose chunks are 1024 columns wide: a row of a chunk is
/// 4 KiB, so each page of the values is one chunk's row. The `.npy` header
/// is padded to a page, so a cold page read of the file asks for one chunk
/// and costs one GET. (With numpy's 128-byte header each page straddled
/// two chunks: two GETs.)
#[test]
fn s3_a_page_of_values_in_one_chunk_costs_one_get() {
    if !fuse_available() {
        return;
    }
    let Some((dir, want)) = written_by_python(ROWS, "rows.npy") else {
        return;
    };
    on_s3(dir.path(), "zpages", |m, count| {
        assert_eq!(want.len(), 4096 + 16 * 4096 * 4);
        let f = std::fs::File::open(m.path("rows.npy")).unwrap();
        let mut total = 0;
        // Row 5 of chunk 2, row 9 of chunk 0, ...: pages far apart, so the
        // kernel asks for each alone.
        for (row, chunk) in [(5u64, 2u64), (9, 0), (3, 3), (12, 1)] {
            let off = 4096 + (row * 4 + chunk) * 4096;
            let before = settled(count);
            let mut buf = vec![0u8; 4096];
            f.read_exact_at(&mut buf, off).unwrap();
            let cost = settled(count) - before;
            assert!(buf[..] == want[off as usize..off as usize + 4096]);
            assert!(cost <= 1, "row {row} of chunk {chunk}: {cost} GETs");
            total += cost;
        }
        assert_eq!(total, 4, "one GET per chunk: the reads were cold");
    });
}
