//! Damaged files made from real fixtures: truncations at every structural
//! boundary, bit flips in headers, offsets and streams, lying sizes. Opening
//! and reading must end quickly with data or a clear error: no panic, no
//! hang, no allocation sized by an unchecked field.

use crate::common;
use common::*;
use std::time::{Duration, Instant};

const FILES: &[&str] = &[
    "frame/blocks-delta.b2frame",
    "frame/variable-chunks.b2frame",
    "frame/zstd-dict.b2frame",
    "frame/special-value.b2frame",
    "b2nd/array1-2d.b2nd",
    "b2nd/array11-1d.b2nd",
    "bloscpack/ndarray-0.blp",
    "packed/packed-0.b2pack",
    "snappy/snappy-0-text.blosc",
];

fn try_read(path: &std::path::Path) -> Result<usize, String> {
    let env = per_cpu(4 << 20);
    match blosc_decode::open_path_with(path, &env) {
        Ok(None) => Ok(0),
        Err(e) => Err(e.to_string()),
        Ok(Some(c)) => {
            // A damaged header may claim any size: read at most 64 MiB, in pieces.
            let len = c.len().min(64 << 20);
            let mut buf = vec![0u8; 1 << 20];
            let mut pos = 0;
            while pos < len {
                let n = c.read_at(pos, &mut buf).map_err(|e| e.to_string())?;
                if n == 0 {
                    break;
                }
                pos += n as u64;
            }
            Ok(pos as usize)
        }
    }
}

fn check(path: &std::path::Path, what: &str) {
    let t = Instant::now();
    let r = try_read(path);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "{what}: took {:?}",
        t.elapsed()
    );
    if let Err(e) = r {
        // Errors name the file they are about.
        assert!(
            e.contains(&*path.to_string_lossy()) || e.contains("damaged"),
            "{what}: error without the file: {e}"
        );
    }
}

/// Where the intact file's structures begin and end, as its own index and
/// chunk layouts say: each stored chunk's start, header end, prefix end
/// (block starts and dictionary), every block's streams, the chunk's end;
/// for a frame, its header's end and its trailer's start.
fn boundaries(path: &std::path::Path, bytes: &[u8]) -> Vec<usize> {
    use blosc_decode::format::frame;
    use blosc_decode::index::ChunkLoc;
    let c = blosc_decode::open_path(path).unwrap().expect("a container");
    let mut v = Vec::new();
    for (ci, e) in c.chunks().iter().enumerate() {
        let ChunkLoc::Stored {
            src: 0,
            offset,
            cbytes,
        } = e.loc
        else {
            continue;
        };
        let at = offset as usize;
        v.extend([at, at + 16, at + 32, at + cbytes as usize]);
        let l = c.layout(ci).unwrap();
        v.push(at + l.prefix_len);
        for x in &l.extents {
            v.extend([at + x.start as usize, at + x.end as usize]);
        }
    }
    if frame::is_frame(bytes) {
        let (header_len, _) = frame::prefix(bytes).unwrap();
        let trailer = frame::trailer_len(bytes).unwrap() as usize;
        v.extend([header_len as usize, bytes.len().saturating_sub(trailer)]);
    }
    v
}

/// Offsets worth cutting or flipping at: every byte of the first 160, each
/// structural boundary and the bytes on either side of it, a spread over
/// the rest, and the last 64.
fn interesting(path: &std::path::Path, bytes: &[u8]) -> Vec<usize> {
    let len = bytes.len();
    let mut v: Vec<usize> = (0..len.min(160)).collect();
    let step = (len / 200).max(1);
    v.extend((160..len).step_by(step));
    v.extend(len.saturating_sub(64)..len);
    let bs = boundaries(path, bytes);
    assert!(bs.len() >= 4, "{path:?}: its structure was not found");
    for b in bs {
        v.extend([b.saturating_sub(1), b, b + 1]);
    }
    v.retain(|&at| at < len);
    v.sort_unstable();
    v.dedup();
    v
}

#[test]
fn truncations_never_panic_or_hang() {
    let dir = tempfile::tempdir().unwrap();
    for name in FILES {
        let bytes = std::fs::read(fixture(name)).unwrap();
        let p = dir.path().join("damaged");
        for cut in interesting(&fixture(name), &bytes) {
            std::fs::write(&p, &bytes[..cut]).unwrap();
            check(&p, &format!("{name} truncated at {cut}"));
        }
    }
}

#[test]
fn bit_flips_never_panic_or_hang() {
    let dir = tempfile::tempdir().unwrap();
    for name in FILES {
        let bytes = std::fs::read(fixture(name)).unwrap();
        let p = dir.path().join("damaged");
        for at in interesting(&fixture(name), &bytes) {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[at] ^= mask;
                std::fs::write(&p, &b).unwrap();
                check(&p, &format!("{name} byte {at} ^ {mask:#x}"));
            }
        }
    }
}

#[test]
fn lying_sizes_are_errors_not_allocations() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("damaged");
    // A chunk claiming 2 GiB in a file of a few hundred bytes.
    let mut chunk = std::fs::read(fixture("snappy/snappy-0-text.blosc")).unwrap();
    chunk[4..8].copy_from_slice(&i32::MAX.to_le_bytes());
    std::fs::write(&p, &chunk).unwrap();
    check(&p, "nbytes = 2 GiB");
    // Offsets index claiming a huge number of chunks.
    let frame = std::fs::read(fixture("frame/variable-chunks.b2frame")).unwrap();
    for pat in [u32::MAX, 0x7fff_fff0, 1 << 30] {
        for at in (0..frame.len().saturating_sub(4)).step_by(7) {
            let mut b = frame.clone();
            b[at..at + 4].copy_from_slice(&pat.to_le_bytes());
            std::fs::write(&p, &b).unwrap();
            check(&p, &format!("frame with {pat:#x} at {at}"));
        }
    }
    // Bloscpack with a lying nchunks and offsets.
    let bp = std::fs::read(fixture("bloscpack/ndarray-0.blp")).unwrap();
    for (at, v) in [(16usize, i64::MAX), (16, 1 << 40), (24, i64::MAX), (24, -5)] {
        let mut b = bp.clone();
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        std::fs::write(&p, &b).unwrap();
        check(&p, &format!("bloscpack {v} at {at}"));
    }
}

#[test]
fn checksum_mismatch_names_the_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.blp");
    let mut b = std::fs::read(fixture("bloscpack/ndarray-0.blp")).unwrap();
    let n = b.len();
    b[n - 100] ^= 0x40; // inside the last chunk's data
    std::fs::write(&p, &b).unwrap();
    let e = try_read(&p).unwrap_err();
    assert!(
        e.contains("checksum mismatch") && e.contains("chunk"),
        "{e}"
    );
}
