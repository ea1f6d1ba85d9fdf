//! A read answered in pieces (`ZarrArray::read_npy_pieces`): runs of
//! chunks decoded whole, and of Blosc blocks decoded, come from the cache
//! as they are, the rest from the reader's buffer; put together they are
//! the bytes `read_npy_at` reads.

use blosc_decode::cache::Piece;
use blosc_decode::container::Env;
use bloscfs_zarr::{DirStore, ZarrArray};
use std::path::Path;
use std::sync::Arc;

/// Element `i` of the arrays written here.
fn value(i: u64) -> u32 {
    (i.wrapping_mul(2_654_435_761) >> 7) as u32
}

/// A v3 array of `shape` uint32 in chunks of `chunks` (2-D), each chunk
/// compressed by zstd (`codecs` after `bytes`), every chunk written.
fn write(dir: &Path, shape: [u64; 2], chunks: [u64; 2], zstd: bool) {
    let codecs = if zstd {
        r#"{"name": "bytes", "configuration": {"endian": "little"}},
           {"name": "zstd", "configuration": {"level": 0, "checksum": false}}"#
    } else {
        r#"{"name": "bytes", "configuration": {"endian": "little"}}"#
    };
    let doc = format!(
        r#"{{"zarr_format": 3, "node_type": "array", "shape": {shape:?},
        "data_type": "uint32", "fill_value": 0,
        "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": {chunks:?}}}}},
        "chunk_key_encoding": {{"name": "default"}}, "codecs": [{codecs}]}}"#
    );
    std::fs::write(dir.join("zarr.json"), doc).unwrap();
    for ci in 0..shape[0].div_ceil(chunks[0]) {
        for cj in 0..shape[1].div_ceil(chunks[1]) {
            let mut raw = Vec::new();
            for r in 0..chunks[0] {
                for c in 0..chunks[1] {
                    let (i, j) = (ci * chunks[0] + r, cj * chunks[1] + c);
                    let v = if i < shape[0] && j < shape[1] {
                        value(i * shape[1] + j)
                    } else {
                        u32::MAX
                    };
                    raw.extend_from_slice(&v.to_le_bytes());
                }
            }
            let raw = if zstd {
                zstd::bulk::compress(&raw, 1).unwrap()
            } else {
                raw
            };
            let p = dir.join(format!("c/{ci}/{cj}"));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, raw).unwrap();
        }
    }
}

/// The answer of `pieces` over `buf`, put together.
fn assembled(buf: &[u8], pieces: &[Piece]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in pieces {
        match p {
            Piece::Buf(r) => {
                assert_eq!(r.start, out.len(), "a buffer piece out of place");
                out.extend_from_slice(&buf[r.clone()]);
            }
            Piece::Block(b, r) => out.extend_from_slice(&b[r.clone()]),
        }
    }
    out
}

fn shared(pieces: &[Piece]) -> usize {
    pieces
        .iter()
        .filter(|p| matches!(p, Piece::Block(..)))
        .count()
}

/// Windows of every kind (the header, edges, a chunk's runs, past the end)
/// of arrays whose runs are 4 KiB, 208 bytes in the edge chunks:
/// assembled, they are the bytes `read_npy_at` reads; runs are shared when
/// they are 2 KiB or more on average, and not otherwise.
#[test]
fn pieces_put_together_are_the_bytes_read() {
    for zstd in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), [20, 2100], [8, 1024], zstd);
        let env = Env::new(64 << 20);
        let a = ZarrArray::open_with(Arc::new(DirStore::new(tmp.path())), env).unwrap();
        let len = a.npy_len();
        let h = a.npy_header().len() as u64;
        let row = 2100 * 4;
        // (offset, length, whether runs are shared)
        let windows = [
            (0, 10, false),
            (0, 300_000, true),
            (h, 65536, true),
            (h + 4096 * 2, 3 * row as usize, true),
            (h + 3 * row + 100, 40_000, true),
            (h + 2048 * 4, 208, false),
            // 696, 4096 and 208 bytes: 1667 a run on average.
            (len - 5000, 8192, false),
            (len, 100, false),
        ];
        for (off, n, shares) in windows {
            let mut want = vec![0u8; n];
            let got = a.read_npy_at(off, &mut want).unwrap();
            want.truncate(got);
            let mut buf = vec![0xAAu8; n];
            let (got2, pieces) = a.read_npy_pieces(off, &mut buf).unwrap();
            assert_eq!(got2, got, "zstd {zstd}: bytes read at {off}");
            assert!(
                assembled(&buf, &pieces) == want,
                "zstd {zstd}: other bytes at {off}"
            );
            assert_eq!(shared(&pieces) > 0, shares, "zstd {zstd}: at {off} +{n}");
        }
    }
}

/// An answer is written with one `iovec` a piece: a read of more than 256
/// runs is copied whole, one of fewer is shared (2 KiB runs).
#[test]
fn a_read_of_many_runs_is_copied() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), [64, 4096], [8, 512], true);
    let a = ZarrArray::open_with(Arc::new(DirStore::new(tmp.path())), Env::new(64 << 20)).unwrap();
    let h = a.npy_header().len() as u64;
    for (runs, shares) in [(200, true), (257, false)] {
        let mut want = vec![0u8; runs * 2048];
        a.read_npy_at(h, &mut want).unwrap();
        let mut buf = vec![0u8; want.len()];
        let (n, pieces) = a.read_npy_pieces(h, &mut buf).unwrap();
        assert!(
            n == want.len() && assembled(&buf, &pieces) == want,
            "{runs} runs"
        );
        assert_eq!(
            shared(&pieces),
            if shares { runs } else { 0 },
            "{runs} runs"
        );
    }
}
