//! Variable-length-block chunks (format version 6, `blosc2_flags2` bit 0):
//! single chunks and frames written by python-blosc2 4.14.1
//! (scripts/fixtures/writers/vlblocks.py), read whole and in pieces against the
//! reference's own decoding; a small read decodes one block; lying sizes
//! and starts give errors naming the file, chunk and block.

use crate::common;
use blosc_decode::decode::decompress_chunk;
use blosc_decode::format::chunk::ChunkLayout;
use blosc_decode::io::MemSource;
use blosc_decode::{open_path_with, Env};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

const DIR: &str = "writers/vlblocks";

fn path(name: &str) -> PathBuf {
    common::fixture(&format!("{DIR}/{name}"))
}

fn manifest() -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path("manifest.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["fixtures"].as_array().unwrap().clone()
}

fn entry(name: &str) -> serde_json::Value {
    manifest()
        .into_iter()
        .find(|f| f["path"] == name)
        .unwrap_or_else(|| panic!("{name} not in the manifest"))
}

fn sizes(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// No decode-ahead, so the decode counter counts what reads asked for.
fn open(name: &str) -> (Env, blosc_decode::Container) {
    let env = Env::new(64 << 20);
    let c = open_path_with(&path(name), &env).unwrap().unwrap();
    (env, c)
}

fn read_all(c: &blosc_decode::Container) -> blosc_decode::error::Result<Vec<u8>> {
    let mut buf = vec![0u8; c.len() as usize];
    let n = c.read_at(0, &mut buf)?;
    assert_eq!(n, buf.len());
    Ok(buf)
}

/// Every fixture the reference decodes to the data written gives the same
/// bytes here (its SHA-256), with the block sizes the writer was given.
#[test]
fn every_fixture_reads_as_the_reference_decodes_it() {
    let mut seen = 0;
    for f in manifest() {
        if f["expect"] != "ok" {
            continue;
        }
        let name = f["path"].as_str().unwrap();
        let (_, c) = open(name);
        let all = read_all(&c).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            format!("{:x}", Sha256::digest(&all)),
            f["sha256"].as_str().unwrap(),
            "{name}"
        );
        let per_chunk: Vec<Vec<u32>> = match f["kind"].as_str().unwrap() {
            "chunk" => vec![sizes(&f["block_sizes"])],
            _ => f["chunk_block_sizes"]
                .as_array()
                .unwrap()
                .iter()
                .map(sizes)
                .collect(),
        };
        assert_eq!(c.chunks().len(), per_chunk.len(), "{name}");
        for (ci, want) in per_chunk.iter().enumerate() {
            let l = c.layout(ci).unwrap();
            assert!(l.header.vl_blocks(), "{name} chunk {ci}");
            let got: Vec<u32> = (0..l.nblocks()).map(|i| l.block_len(i)).collect();
            assert_eq!(&got, want, "{name} chunk {ci}");
        }
        seen += 1;
    }
    assert!(seen >= 30, "{seen} fixtures checked");
}

/// Reads of every size at every block boundary and inside blocks, each on
/// a fresh container (cold) and again (cached), match the whole content.
#[test]
fn pieces_match_the_whole() {
    for f in manifest() {
        if f["expect"] != "ok" {
            continue;
        }
        let name = f["path"].as_str().unwrap();
        let (_, c) = open(name);
        let whole = read_all(&c).unwrap();
        let mut offs = vec![0u64, 1, whole.len() as u64 - 1];
        for ci in 0..c.chunks().len() {
            let l = c.layout(ci).unwrap();
            let base = c.chunks()[ci].uoff;
            for i in 0..l.nblocks() {
                let s = base + l.block_start(i);
                offs.extend([s.saturating_sub(1), s, s + l.block_len(i) as u64 / 2]);
            }
        }
        for &off in &offs {
            for len in [1usize, 3, 17, 700, 5000] {
                let (_, cold) = open(name);
                let end = (off as usize + len).min(whole.len());
                let mut buf = vec![0u8; end - off as usize];
                cold.read_at(off, &mut buf).unwrap();
                assert_eq!(buf, whole[off as usize..end], "{name} at {off}+{len}");
                c.read_at(off, &mut buf).unwrap();
                assert_eq!(
                    buf,
                    whole[off as usize..end],
                    "{name} cached at {off}+{len}"
                );
            }
        }
    }
}

/// A few bytes in the middle of one block of a chunk of 64 decode that
/// block alone; a read across a boundary decodes the two blocks it touches.
#[test]
fn a_small_read_decodes_one_block() {
    let name = "zstd-many-blocks.b2";
    let (_, c) = open(name);
    let whole = read_all(&c).unwrap();
    let (env, c) = open(name);
    let decoded = || env.stats.blocks_decoded.load(Ordering::Relaxed);
    // The chunk's layout (header, block starts, the blocks' size fields) is
    // read once; then a block read reads that block's stream alone.
    let l = c.layout(0).unwrap();
    assert_eq!(l.nblocks(), 64);
    let read = || env.stats.source_bytes_read.load(Ordering::Relaxed);
    let before = read();
    let (s, n) = (l.block_start(40), l.block_len(40) as u64);
    let mut buf = vec![0u8; 10];
    c.read_at(s + n / 2, &mut buf).unwrap();
    assert_eq!(buf, whole[(s + n / 2) as usize..][..10]);
    assert_eq!(decoded(), 1);
    let e = l.extents[40];
    assert_eq!(read() - before, (e.end - e.start) as u64);
    // Across the end of block 40 into block 41.
    let mut buf = vec![0u8; 8];
    c.read_at(s + n - 4, &mut buf).unwrap();
    assert_eq!(buf, whole[(s + n - 4) as usize..][..8]);
    assert_eq!(decoded(), 2, "block 40 cached, block 41 decoded");
}

/// As the FUSE adapter reads (with a `Deferred`): a small read of a
/// shuffled VL block is answered from its unshuffled range, then the whole
/// block is cached.
#[test]
fn a_small_read_of_a_shuffled_block_is_answered_first() {
    let name = "zstd-one-block.b2";
    let (_, c) = open(name);
    let whole = read_all(&c).unwrap();
    let (env, c) = open(name);
    let mut buf = vec![0u8; 100];
    let mut later = blosc_decode::Deferred::new();
    c.read_at_deferring(1234, &mut buf, &mut later).unwrap();
    later.run();
    assert_eq!(buf, whole[1234..1334]);
    c.read_at(3001, &mut buf).unwrap();
    assert_eq!(buf, whole[3001..3101]);
    assert_eq!(env.stats.blocks_decoded.load(Ordering::Relaxed), 1);
    // Blocks whose size is no multiple of the typesize (8): the bytes past
    // the last whole element are not shuffled, in a small read too.
    let name = "lz4-shuffle-ts8-odd-sizes.b2";
    let (_, c) = open(name);
    let whole = read_all(&c).unwrap();
    let l = c.layout(0).unwrap();
    let (s3, n3) = (l.block_start(3), l.block_len(3) as u64);
    assert_eq!(n3, 4097);
    for off in [
        s3,
        s3 + 1,
        s3 + 2000,
        s3 + n3 - 100,
        s3 + n3 - 9,
        s3 + n3 - 1,
    ] {
        let (env, c) = open(name);
        let mut buf = vec![0u8; (s3 + n3 - off).min(100) as usize];
        let mut later = blosc_decode::Deferred::new();
        c.read_at_deferring(off, &mut buf, &mut later).unwrap();
        later.run();
        assert_eq!(buf, whole[off as usize..][..buf.len()], "at {off}");
        let mut all = vec![0u8; n3 as usize];
        c.read_at(s3, &mut all).unwrap();
        assert_eq!(
            all,
            whole[s3 as usize..][..n3 as usize],
            "cached after {off}"
        );
        assert_eq!(env.stats.blocks_decoded.load(Ordering::Relaxed), 1);
    }
}

/// C-Blosc2 3.3 delta-encodes each VL block against itself but decodes the
/// blocks past the first against the chunk's first bytes (and python-blosc2's
/// block-wise decoder skips the delta step): no decoder gives back the data
/// written (the writing script checks that). Refused, not served wrong.
#[test]
fn delta_over_several_blocks_is_refused() {
    assert_eq!(entry("lz4-delta-blocks.b2")["expect"], "error");
    let (_, c) = open("lz4-delta-blocks.b2");
    let e = read_all(&c).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("lz4-delta-blocks.b2: chunk 0: "), "{msg}");
    assert!(
        msg.contains("delta filter over 4 variable-length blocks"),
        "{msg}"
    );
    // One block has nothing to get wrong: it round-trips in the reference.
    let (_, c) = open("lz4-delta-one-block.b2");
    let want: Vec<u8> = (0..3000i32).flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(read_all(&c).unwrap(), want);
}

/// The chunk `name` with `edit` applied, opened from memory as a file named
/// `bad.b2`; the error of reading it whole.
fn corrupted(name: &str, edit: impl FnOnce(&mut Vec<u8>)) -> blosc_decode::error::Error {
    let mut data = std::fs::read(path(name)).unwrap();
    edit(&mut data);
    // The whole-chunk decoder (the `chunk` fuzz target's) refuses it too.
    assert!(
        ChunkLayout::parse(&data).is_err() || decompress_chunk(&data).is_err(),
        "decompress_chunk accepted it"
    );
    let env = Env::new(1 << 20);
    let src = Arc::new(MemSource::new(data));
    match blosc_decode::open_source(src, Path::new("bad.b2"), &env) {
        Err(e) => e,
        Ok(None) => panic!("not recognised"),
        Ok(Some(c)) => read_all(&c).unwrap_err(),
    }
}

fn le32(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(d[at..at + 4].try_into().unwrap())
}

fn put32(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

type Edit = Box<dyn FnOnce(&mut Vec<u8>)>;

/// Where block `i`'s start is stored.
fn bstart_at(i: usize) -> usize {
    32 + 4 * i
}

#[test]
fn lying_sizes_and_starts_name_file_chunk_and_block() {
    let name = "lz4-nofilter-ts8.b2";
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "block 2's size field grown: the sizes pass nbytes",
            Box::new(|d| {
                let at = le32(d, bstart_at(2)) as usize;
                put32(d, at, 0x7fff_0000);
            }),
            "block 2: VL block sizes reach",
        ),
        (
            "block 3's size field negative",
            Box::new(|d| {
                let at = le32(d, bstart_at(3)) as usize;
                put32(d, at, 0xffff_fff0);
            }),
            "block 3: VL block size field is -16",
        ),
        (
            "block 1 starts where block 0 does",
            Box::new(|d| {
                let s0 = le32(d, bstart_at(0));
                put32(d, bstart_at(1), s0);
            }),
            "block 1: VL block starts at",
        ),
        (
            "block 4 starts past the chunk",
            Box::new(|d| put32(d, bstart_at(4), 1 << 30)),
            "block 4 starts at 1073741824, outside the chunk's data",
        ),
        (
            "two sizes swapped: they still add up",
            Box::new(|d| {
                let (a, b) = (
                    le32(d, bstart_at(0)) as usize,
                    le32(d, bstart_at(1)) as usize,
                );
                let (x, y) = (le32(d, a), le32(d, b));
                put32(d, a, y);
                put32(d, b, x);
            }),
            "block 0: ",
        ),
        (
            "the last block's stream cut to its size field",
            Box::new(|d| {
                let last = le32(d, bstart_at(5)) as usize;
                put32(d, 12, (last + 4) as u32);
                d.truncate(last + 4);
            }),
            "block 5: VL block of 4 stored bytes",
        ),
    ];
    assert_eq!(entry(name)["nblocks"], 6);
    for (what, edit, want) in cases {
        let e = corrupted(name, edit);
        let msg = e.to_string();
        assert!(msg.starts_with("bad.b2: chunk 0: "), "{what}: {msg}");
        assert!(msg.contains(want), "{what}: {msg}");
    }
}

/// The header rules C-Blosc2 applies to VL-block chunks (such a file is not
/// taken for a chunk at all).
#[test]
fn vl_chunks_cannot_be_memcpyed_or_special() {
    let mut d = std::fs::read(path("zlib-nofilter-ts4.b2")).unwrap();
    d[2] |= 0x02;
    let e = ChunkLayout::parse(&d).unwrap_err();
    assert!(e.to_string().contains("cannot be memcpyed"), "{e}");
    d[2] &= !0x02;
    d[31] |= 0x10;
    let e = ChunkLayout::parse(&d).unwrap_err();
    assert!(e.to_string().contains("cannot hold a special value"), "{e}");
}

/// A frame whose chunk 2 has a lying size field: the error names the frame,
/// chunk 2 and the block; the other chunks still read.
#[test]
fn a_bad_chunk_in_a_frame_is_named() {
    let name = "schunk-mixed.b2frame";
    let (_, good) = open(name);
    let whole = read_all(&good).unwrap();
    let (src, offset) = match good.chunks()[2].loc {
        blosc_decode::index::ChunkLoc::Stored { src, offset, .. } => (src, offset as usize),
        _ => unreachable!(),
    };
    assert_eq!(src, 0);
    let mut data = std::fs::read(path(name)).unwrap();
    let at = offset + le32(&data, offset + bstart_at(1)) as usize;
    let v = le32(&data, at);
    put32(&mut data, at, v + 1);
    let env = Env::new(1 << 20);
    let c = blosc_decode::open_source(
        Arc::new(MemSource::new(data)),
        Path::new("bad.b2frame"),
        &env,
    )
    .unwrap()
    .unwrap();
    let msg = read_all(&c).unwrap_err().to_string();
    // The sizes are checked as they add up: the last block passes nbytes.
    assert!(
        msg.starts_with("bad.b2frame: chunk 2: block 6: VL block sizes reach 17040 bytes"),
        "{msg}"
    );
    let u = c.chunks()[3].uoff as usize;
    let mut buf = vec![0u8; 1000];
    c.read_at(u as u64, &mut buf).unwrap();
    assert_eq!(buf, whole[u..u + 1000]);
}

/// `bloscfs info` says the blocks vary rather than showing the block count
/// the header's `blocksize` field holds.
#[test]
fn info_says_the_blocks_vary() {
    let (_, c) = open("batcharray-lz4.b2frame");
    use blosc_decode::summary::{RowKind, Stored};
    assert_eq!(c.summary().blocksize, Some(None));
    let (rows, err) = c.chunk_rows();
    assert!(err.is_none(), "{err:?}");
    let varying = Stored::Blocks {
        codec: Some("lz4"),
        nblocks: 27,
        blocksize: None,
        memcpyed: false,
    };
    assert!(
        rows.iter()
            .any(|r| matches!(&r.kind, RowKind::Stored { content: Ok(k), .. } if *k == varying)),
        "{rows:?}"
    );
}

/// Bytes of the VL fixtures overwritten at random, mostly in the header,
/// block starts and size fields: parsing, whole-chunk decoding and reads
/// through a container give bytes or an error, never a panic (what the
/// `chunk` and `read_at` fuzz targets check, on inputs near real ones).
#[test]
fn random_damage_never_panics() {
    use proptest::prelude::*;
    let names = [
        "lz4-nofilter-ts8.b2",
        "zstd-dict.b2",
        "lz4-shuffle-ts8-odd-sizes.b2",
        "zlib-shuffle-bytedelta-ts8.b2",
        "schunk-mixed.b2frame",
    ];
    let files: Vec<Vec<u8>> = names
        .iter()
        .map(|n| std::fs::read(path(n)).unwrap())
        .collect();
    let cfg = ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(cfg, |(which in 0..names.len(),
                     edits in prop::collection::vec((0usize..1 << 16, any::<u32>(), any::<bool>()), 1..4))| {
        let mut d = files[which].clone();
        for (at, v, near) in edits {
            // Near the start (header, block starts, first size fields) or anywhere.
            let at = if near { at % d.len().min(160) } else { at % d.len() };
            let end = (at + 4).min(d.len());
            d[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
        }
        if let Ok(l) = ChunkLayout::parse(&d) {
            if l.header.nbytes <= 1 << 24 {
                let _ = decompress_chunk(&d);
            }
        }
        let env = Env::new(1 << 20);
        let src = Arc::new(MemSource::new(d));
        if let Ok(Some(c)) = blosc_decode::open_source(src, Path::new("x"), &env) {
            let mut buf = vec![0u8; c.len().min(1 << 20) as usize];
            let _ = c.read_at(0, &mut buf);
            let n = buf.len().min(100);
            let _ = c.read_at(c.len() / 2, &mut buf[..n]);
        }
    });
}
