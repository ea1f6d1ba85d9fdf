//! Blosc chunks read block by block, and every decoded byte kept in the
//! byte-bounded cache of the `Env` an array is given: counted, on the
//! `blocks.zarr` arrays zarr-python 2.18 and 3.1 wrote (128 KiB chunks of
//! 32 Blosc blocks of 4 KiB; scripts/fixtures/gen_zarr.py).

#[path = "../../../tests/common/npy.rs"]
mod npy;

use blosc_decode::container::Env;
use bloscfs_zarr::{DirStore, ZarrArray};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

const WRITERS: [&str; 2] = ["z2-2.18.7", "z3-3.1.6"];
const BLOCK: u64 = 4096;
const CHUNK: u64 = 128 << 10;

fn writer(w: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/zarr")
        .join(w)
}

fn open(dir: &Path, env: &Env) -> ZarrArray {
    ZarrArray::open_with(Arc::new(DirStore::new(dir)), env.clone()).unwrap()
}

fn expected(w: &str, rel: &str) -> Vec<u8> {
    let numpy = std::fs::read(writer(w).join("expected").join(format!("{rel}.npy"))).unwrap();
    npy::as_bloscfs_shows(&numpy)
}

fn blocks_decoded(env: &Env) -> u64 {
    env.stats.blocks_decoded.load(Ordering::Relaxed)
}

/// `len` bytes of the `.npy` at `off`, checked against zarr-python's.
fn check(a: &ZarrArray, want: &[u8], off: u64, len: usize) {
    let mut buf = vec![0u8; len];
    let n = a.read_npy_at(off, &mut buf).unwrap();
    let end = (off as usize + len).min(want.len());
    assert_eq!(&buf[..n], &want[off as usize..end], "at {off}+{len}");
}

#[test]
fn a_4k_read_decodes_only_the_blocks_it_touches() {
    for w in WRITERS {
        let env = Env::new(64 << 20);
        let a = open(&writer(w).join("stores/blocks.zarr"), &env);
        assert!(a.by_block(), "{w}");
        let want = expected(w, "blocks.zarr");
        let h = a.npy_header().len() as u64;
        // Bytes 10000..14096 of chunk 1: its blocks 2 and 3.
        check(&a, &want, h + CHUNK + 10_000, 4096);
        assert_eq!(blocks_decoded(&env), 2, "{w}");
        // Within the same blocks again: from the cache.
        check(&a, &want, h + CHUNK + 9000, 4096);
        assert_eq!(blocks_decoded(&env), 2, "{w}");
        // One block-aligned 4 KiB read: one block.
        check(&a, &want, h + 7 * BLOCK, 4096);
        assert_eq!(blocks_decoded(&env), 3, "{w}");
        // Of the unwritten chunk row: none.
        check(&a, &want, h + 2 * CHUNK + 100, 4096);
        assert_eq!((blocks_decoded(&env), a.decodes()), (3, 0), "{w}");
    }
}

#[test]
fn a_sequential_read_decodes_each_block_once() {
    for w in WRITERS {
        let env = Env::new(64 << 20);
        let a = open(&writer(w).join("stores/blocks.zarr"), &env);
        let want = expected(w, "blocks.zarr");
        for off in (0..a.npy_len()).step_by(4096) {
            check(&a, &want, off, 4096);
        }
        // Two stored chunks of 32 blocks.
        assert_eq!(blocks_decoded(&env), 64, "{w}");
        // Each block it is done with is the buffer of one it decodes next
        // (no page to fault in): a few are left in the cache, not 64.
        let kept = env.cache.bytes() / BLOCK;
        assert!((1..8).contains(&kept), "{w}: {kept} blocks in the cache");
        // The array's blocks leave the cache with it.
        drop(a);
        assert_eq!(env.cache.bytes(), 0, "{w}");
    }
}

/// A chunk's container keyed by an id and a chunk number keeps its blocks
/// in the cache past its own life: one opened again over the same chunk
/// and keyed alike finds them; one keyed otherwise does not.
#[test]
fn a_keyed_chunk_container_finds_the_blocks_of_its_predecessor() {
    use blosc_decode::container::{new_cache_id, Container};
    let p = writer("z2-2.18.7").join("stores/blocks.zarr/0.0");
    let env = Env::new(64 << 20);
    let id = new_cache_id();
    let read = |chunk: u64| {
        let src = Arc::new(blosc_decode::io::FileSource::open(&p).unwrap());
        let index = blosc_decode::open::open_chunk(src).unwrap();
        let c = Container::new(&p, index, env.clone()).unwrap();
        let c = c.keyed_as(id, chunk);
        // Parts of blocks 1 and 2 (whole blocks would be decoded into
        // the reader's buffer, not cached).
        let mut buf = vec![0u8; BLOCK as usize];
        c.read_at(BLOCK + BLOCK / 2, &mut buf).unwrap();
    };
    read(7);
    assert_eq!(blocks_decoded(&env), 2);
    read(7);
    assert_eq!(blocks_decoded(&env), 2, "blocks found again");
    read(8);
    assert_eq!(blocks_decoded(&env), 4, "another chunk number");
    env.cache.forget_container(id);
    assert_eq!(env.cache.bytes(), 0);
}

/// Chunks of other pipelines are decoded whole into the shared cache: a
/// second read of the whole array decodes nothing, and a budget smaller
/// than the array bounds what is kept.
#[test]
fn whole_chunks_go_through_the_shared_cache() {
    let dir = writer("z3-3.1.6").join("stores/zstd.zarr");
    let want = expected("z3-3.1.6", "zstd.zarr");
    let env = Env::new(64 << 20);
    let a = open(&dir, &env);
    assert!(!a.by_block());
    check(&a, &want, 0, want.len());
    check(&a, &want, 0, want.len());
    assert_eq!(a.decodes(), 3);
    assert_eq!(env.cache.bytes(), 3 * 4 * 4 * 8);
    assert!(env.stats.cache_hits.load(Ordering::Relaxed) > 0);
    // Another array on the same Env shares its budget: its own chunks,
    // decoded into the buffers of `a`'s (its second read followed its
    // first: `a` read on, and is done with them).
    let b = open(&dir, &env);
    check(&b, &want, 0, want.len());
    assert_eq!((b.decodes(), env.cache.bytes()), (3, 3 * 4 * 4 * 8));
    // Two chunks fit a budget of 300 bytes (one is at most half of it).
    let small = Env::new(300);
    let c = open(&dir, &small);
    for off in (0..want.len() as u64).step_by(8) {
        check(&c, &want, off, 8);
        assert!(small.cache.bytes() <= 300);
    }
    let whole = open(&dir, &Env::new(4096));
    check(&whole, &want, 0, want.len());
    assert_eq!(whole.decodes(), 3);
    drop((a, b));
    assert_eq!(env.cache.bytes(), 0, "dropped arrays leave the cache");
}

/// A reader that reads on is done with a chunk decoded whole once it has
/// its last values, and the next chunk is decoded into its buffer (mapped
/// already, where a new one costs a page fault per 4 KiB): `zstd.zarr`
/// read 8 bytes at a time keeps 2 of its 3 chunks in the cache, not 3.
/// Read at random, every chunk stays.
#[test]
fn a_reader_that_reads_on_decodes_into_the_buffers_of_chunks_it_is_done_with() {
    let dir = writer("z3-3.1.6").join("stores/zstd.zarr");
    let want = expected("z3-3.1.6", "zstd.zarr");
    let chunk = 4 * 4 * 8;
    let env = Env::new(64 << 20);
    let a = open(&dir, &env);
    for off in (0..want.len() as u64).step_by(8) {
        check(&a, &want, off, 8);
    }
    assert_eq!((a.decodes(), env.cache.bytes()), (3, 2 * chunk));

    let env = Env::new(64 << 20);
    let a = open(&dir, &env);
    let h = a.npy_header().len() as u64;
    // Chunks 0/0, 2/0 and 0/1 (to its last values), each after a jump.
    for off in [h, h + 8 * 64, h + 3 * 64 + 40] {
        check(&a, &want, off, 24);
    }
    assert_eq!((a.decodes(), env.cache.bytes()), (3, 3 * chunk));
}

/// A corrupt Blosc block of a chunk: the reads that touch it fail (EIO,
/// naming the chunk), the chunk's other blocks read as zarr-python's.
#[test]
fn a_corrupt_block_fails_only_the_reads_that_touch_it() {
    for (w, key) in [("z2-2.18.7", "0.0"), ("z3-3.1.6", "c/0/0")] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a");
        copy_blocks(w, &dir);
        // Block 5's stream says it is longer than the chunk.
        let p = dir.join(key);
        let mut b = std::fs::read(&p).unwrap();
        let at = 16 + 5 * 4;
        let start = i32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        b[start..start + 4].copy_from_slice(&0x7fff_0000i32.to_le_bytes());
        std::fs::write(&p, &b).unwrap();

        let env = Env::new(64 << 20);
        let a = open(&dir, &env);
        let want = expected(w, "blocks.zarr");
        let h = a.npy_header().len() as u64;
        let mut buf = vec![0u8; 100];
        let e = a.read_npy_at(h + 5 * BLOCK + 10, &mut buf).unwrap_err();
        assert_eq!(e.errno(), libc::EIO, "{w}: {e}");
        assert!(e.reason.contains(key), "{w}: {e}");
        // A read across blocks 4 and 5 fails too.
        assert!(a.read_npy_at(h + 5 * BLOCK - 10, &mut buf).is_err());
        // Blocks 4 and 6, and the rest of the array, read as zarr reads.
        check(&a, &want, h + 4 * BLOCK, BLOCK as usize);
        check(&a, &want, h + 6 * BLOCK, BLOCK as usize);
        check(&a, &want, h + CHUNK, CHUNK as usize);
    }
}

/// A copy of `blocks.zarr` of writer `w` in `to`: its metadata file and
/// its two stored chunks.
fn copy_blocks(w: &str, to: &Path) {
    let from = writer(w).join("stores/blocks.zarr");
    for f in [".zarray", "0.0", "1.0", "zarr.json", "c/0/0", "c/1/0"] {
        if from.join(f).is_file() {
            std::fs::create_dir_all(to.join(f).parent().unwrap()).unwrap();
            std::fs::copy(from.join(f), to.join(f)).unwrap();
        }
    }
}
