//! b2nd arrays compressed with C-Blosc2's ZFP plugin codecs (zfp_acc,
//! zfp_prec, zfp_rate), written by python-blosc2 3.0.0, 4.0.0 and 4.14.1
//! (`scripts/fixtures/writers/zfp.py`): served bit for bit as the writer reads them
//! back; a small read decodes one block; damaged streams and arrays without
//! the block shape give errors, never a panic.

use crate::common;
use blosc_decode::{open_path_with, Env, ErrorKind};
use common::fixture;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

const RELEASES: [&str; 3] = ["3.0.0", "4.0.0", "4.14.1"];

struct Fixture {
    path: PathBuf,
    codec: String,
    shape: Vec<u64>,
    /// What the writer's reader returns; `None` for arrays whose blocks are
    /// split into ZFP streams (python-blosc2 3.0 and 4.0 write them; 4.14
    /// refuses them, and older readers overrun their buffers on them).
    sha256: Option<String>,
}

fn fixtures(release: &str) -> Vec<Fixture> {
    let dir = fixture(&format!("writers/zfp/{release}"));
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| Fixture {
            path: dir.join(f["path"].as_str().unwrap()),
            codec: f["codec"].as_str().unwrap().to_string(),
            shape: f["shape"]
                .as_array()
                .map(|a| a.iter().map(|d| d.as_u64().unwrap()).collect())
                .unwrap_or_default(),
            sha256: f["sha256"].as_str().map(str::to_string),
        })
        .collect()
}

/// Where a .npy file's data starts (version 1 or 2/3 headers).
fn npy_data_start(npy: &[u8]) -> usize {
    assert_eq!(&npy[..6], b"\x93NUMPY");
    if npy[6] == 1 {
        10 + u16::from_le_bytes([npy[8], npy[9]]) as usize
    } else {
        12 + u32::from_le_bytes(npy[8..12].try_into().unwrap()) as usize
    }
}

fn read_all(c: &blosc_decode::Container) -> blosc_decode::Result<Vec<u8>> {
    let mut buf = vec![0u8; c.len() as usize];
    let n = c.read_at(0, &mut buf)?;
    assert_eq!(n, buf.len());
    Ok(buf)
}

#[test]
fn every_zfp_array_reads_as_its_writer_reads_it() {
    let (mut seen, mut refused) = (0, 0);
    for release in RELEASES {
        for f in fixtures(release) {
            let env = Env::new(16 << 20);
            let c = open_path_with(&f.path, &env).unwrap().unwrap();
            assert_eq!(c.info().codec, f.codec, "{}", f.path.display());
            let Some(sha256) = &f.sha256 else {
                let e = read_all(&c).unwrap_err();
                assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
                assert!(e.reason.contains("split into 4 streams"), "{e}");
                refused += 1;
                continue;
            };
            let npy = read_all(&c).unwrap_or_else(|e| panic!("{}: {e}", f.path.display()));
            let data = &npy[npy_data_start(&npy)..];
            let shape = format!(
                "'shape': ({}{}",
                f.shape
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                if f.shape.len() == 1 { ",)" } else { ")" }
            );
            assert!(
                String::from_utf8_lossy(&npy[..npy_data_start(&npy)]).contains(&shape),
                "{}: npy header lacks {shape}",
                f.path.display()
            );
            assert_eq!(
                &format!("{:x}", Sha256::digest(data)),
                sha256,
                "{}: data differs from what python-blosc2 {release} reads",
                f.path.display()
            );
            seen += 1;
        }
    }
    // 4.14.1 stores its split blocks raw; 3.0.0 and 4.0.0 split them.
    assert_eq!((seen, refused), (40, 2));
}

#[test]
fn a_small_read_of_a_zfp_array_decodes_one_block() {
    // A 64 x 64 float64 array in one chunk of 8 x 8 blocks (64 blocks).
    let f = fixtures("4.14.1")
        .into_iter()
        .find(|f| f.path.ends_with("rate-f8-blocks.b2nd"))
        .unwrap();
    let env = Env::new(16 << 20);
    let c = open_path_with(&f.path, &env).unwrap().unwrap();
    let whole = read_all(&c).unwrap();
    let start = npy_data_start(&whole) as u64;

    let env = Env::new(16 << 20);
    let c = open_path_with(&f.path, &env).unwrap().unwrap();
    // Row 37, columns 16..24: one row of block (4, 2).
    let off = start + (37 * 64 + 16) * 8;
    let mut buf = vec![0u8; 64];
    c.read_at(off, &mut buf).unwrap();
    assert_eq!(buf, whole[off as usize..off as usize + 64]);
    assert_eq!(env.stats.blocks_decoded.load(Ordering::Relaxed), 1);
}

/// Every stream cut short, and bytes of every block flipped: each read
/// is an error or some bytes, never a panic or a hang.
#[test]
fn damaged_zfp_streams_give_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let mut errors = 0;
    for f in fixtures("4.14.1") {
        let bytes = std::fs::read(&f.path).unwrap();
        assert!(f.sha256.is_some());
        let env = Env::new(1 << 20);
        let good = open_path_with(&f.path, &env).unwrap().unwrap();
        let len = good.len();
        let mut damaged = Vec::new();
        for (k, e) in good.chunks().iter().enumerate() {
            let blosc_decode::index::ChunkLoc::Stored { offset, .. } = e.loc else {
                continue;
            };
            let l = good.layout(k).unwrap();
            let data_start = offset as usize + l.prefix_len;
            let end = offset as usize + l.header.cbytes as usize;
            // Zeros over the second half of each chunk's streams.
            let mut z = bytes.clone();
            let mid = data_start + (end - data_start) / 2;
            z[mid..end].fill(0);
            damaged.push(z);
            // Every 7th byte of the streams inverted.
            let mut x = bytes.clone();
            for b in x[data_start..end].iter_mut().step_by(7) {
                *b = !*b;
            }
            damaged.push(x);
        }
        for (i, d) in damaged.iter().enumerate() {
            let p = dir.path().join(format!("d{i}.b2nd"));
            std::fs::write(&p, d).unwrap();
            let Ok(Some(c)) = open_path_with(&p, &env) else {
                continue;
            };
            assert_eq!(c.len(), len);
            let mut buf = vec![0u8; len as usize];
            if c.read_at(0, &mut buf).is_err() {
                errors += 1;
            }
        }
    }
    // Zeroed fixed-rate streams and flipped bits mostly still decode (ZFP
    // has no checksum); the zeroed tails of variable-rate streams do not.
    assert!(errors > 0);
}

/// A ZFP chunk read alone (no frame, so no b2nd metalayer to give the
/// block shape) is refused with a reason.
#[test]
fn a_zfp_chunk_without_its_array_is_refused_with_a_reason() {
    let f = fixtures("4.14.1")
        .into_iter()
        .find(|f| f.path.ends_with("prec-f4-2d.b2nd"))
        .unwrap();
    let env = Env::new(1 << 20);
    let c = open_path_with(&f.path, &env).unwrap().unwrap();
    let blosc_decode::index::ChunkLoc::Stored { offset, .. } = c.chunks()[0].loc else {
        panic!("chunk 0 is stored");
    };
    // The chunk's own size (the index may only bound it).
    let cbytes = c.layout(0).unwrap().header.cbytes as u64;
    let bytes = std::fs::read(&f.path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("chunk0.b2");
    std::fs::write(&p, &bytes[offset as usize..(offset + cbytes) as usize]).unwrap();
    let one = open_path_with(&p, &env).unwrap().unwrap();
    assert_eq!(one.info().codec, "zfp_prec");
    let e = read_all(&one).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
    assert!(e.reason.contains("block shape"), "{e}");
}

/// A block decodes to the same bytes into a buffer that is not aligned for
/// its floats (a FUSE reply buffer at any offset) as into an aligned one.
#[test]
fn a_zfp_block_decodes_alike_into_unaligned_buffers() {
    for name in ["acc-f4-1d.b2nd", "prec-f8-3d.b2nd", "rate-f8-2d.b2nd"] {
        let f = fixtures("4.14.1")
            .into_iter()
            .find(|f| f.path.ends_with(name))
            .unwrap();
        let env = Env::new(1 << 20);
        let c = open_path_with(&f.path, &env).unwrap().unwrap();
        let blosc_decode::index::ChunkLoc::Stored { offset, .. } = c.chunks()[0].loc else {
            panic!("chunk 0 is stored");
        };
        let l = c.layout(0).unwrap();
        let bytes = std::fs::read(&f.path).unwrap();
        let e = l.extents[0];
        let data = &bytes[offset as usize + e.start as usize..offset as usize + e.end as usize];
        let n = l.block_len(0) as usize;
        let mut aligned = vec![0u64; n.div_ceil(8)];
        let aligned: &mut [u8] = &mut bytemuck_bytes(&mut aligned)[..n];
        blosc_decode::decode::decode_block(&l, 0, data, None, aligned).unwrap();
        for shift in 1..8 {
            let mut v = vec![0u8; n + shift];
            blosc_decode::decode::decode_block(&l, 0, data, None, &mut v[shift..]).unwrap();
            assert_eq!(&v[shift..], &aligned[..], "{name}, shift {shift}");
        }
        assert!(aligned.iter().any(|&b| b != 0), "{name}");
    }
}

fn bytemuck_bytes(v: &mut [u64]) -> &mut [u8] {
    let n = v.len() * 8;
    // SAFETY: a u64 slice viewed as its `8 * len` bytes: same allocation,
    // u8 has no alignment need, and any bit pattern is a valid u8.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, n) }
}
