//! A sharded Zarr array from a remote source (zarr-python 3.1.6's
//! `sharded.zarr/wide`: 65536 uint32 in 2 shards of 8 inner chunks of
//! 16 KiB, zstd on random values, the index at each shard's end): once a
//! shard's index is known, a cold random 4 KiB read of the `.npy` inside
//! one inner chunk costs one GET, over plain HTTP (counted by the server)
//! and over S3 (counted by the daemon).

use crate::common::*;
use crate::counts::mount_gets;
use crate::harness::*;
use crate::servers::*;
use std::os::unix::fs::FileExt;
use std::time::Duration;

const NPY: &str = "sharded.zarr/wide.npy";

/// `sharded.zarr/wide` in a directory of its own.
fn staged() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let from = fixture("zarr/z3-3.1.6/stores/sharded.zarr");
    std::fs::create_dir_all(dir.path().join("sharded.zarr")).unwrap();
    copy(
        &from.join("zarr.json"),
        &dir.path().join("sharded.zarr/zarr.json"),
    );
    copy(&from.join("wide"), &dir.path().join("sharded.zarr/wide"));
    write_manifest(dir.path());
    dir
}

/// `count()` once it has stayed the same for 300 ms (GETs started in the
/// background are counted with what started them).
fn settled(count: &dyn Fn() -> u64) -> u64 {
    let mut last = count();
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = count();
        if now == last {
            return now;
        }
        last = now;
    }
}

/// Through mount `m`: one read in each shard (its index known), then
/// random page-aligned 4 KiB reads each inside one inner chunk not read
/// yet, each costing one GET by `count`.
fn random_reads(m: &RemoteMount, count: &dyn Fn() -> u64) {
    let want = std::fs::read(fixture("zarr/z3-3.1.6/expected/sharded.zarr/wide.npy")).unwrap();
    let f = std::fs::File::open(m.path(NPY)).unwrap();
    // Page 4g + 2 of the file lies inside inner chunk g (16 KiB of values
    // after a 128-byte header).
    assert_eq!(want.len(), 128 + 65536 * 4);
    let read = |g: u64| {
        let off = (4 * g + 2) * 4096;
        let mut buf = vec![0u8; 4096];
        f.read_exact_at(&mut buf, off).unwrap();
        assert!(
            buf[..] == want[off as usize..off as usize + 4096],
            "inner chunk {g}"
        );
    };
    // The last inner chunk of each shard, beside its index.
    read(7);
    read(15);
    for g in [1, 14, 9, 6] {
        let before = settled(count);
        read(g);
        let cost = settled(count) - before;
        assert_eq!(cost, 1, "a random read of inner chunk {g}: {cost} GETs");
    }
}

#[test]
fn http_random_reads_of_a_sharded_array_cost_one_get() {
    if !fuse_available() {
        return;
    }
    let dir = staged();
    let Some(srv) = Faulty::start(dir.path()) else {
        return;
    };
    let mut m = Remote::http(&srv).mount(&[MANIFEST]);
    random_reads(&m, &|| srv.gets());
    m.unmount();
}

#[test]
fn s3_random_reads_of_a_sharded_array_cost_one_get() {
    if !fuse_available() {
        return;
    }
    let dir = staged();
    let Some(moto) = Moto::start() else { return };
    moto.mkbucket("shards");
    moto.upload("shards", "t", dir.path());
    let mut m = Remote::s3(&moto, "shards", "t").mount(&["xattr"]);
    random_reads(&m, &|| mount_gets(&m));
    m.unmount();
}
