//! Every array zarr-python 2.18 and 3.1 wrote (scripts/fixtures/gen_zarr.py,
//! tests/fixtures/zarr) read as a `.npy` file: its bytes are exactly those
//! of `numpy.save` of what zarr-python reads, whole and in windows; a small
//! read decodes one chunk; damaged chunks are errors naming the key.

#[path = "../../../tests/common/npy.rs"]
mod npy;

use bloscfs_zarr::{DirStore, ErrorKind, ZarrArray};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn zarr_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/zarr")
}

/// (writer's directory, manifest entry) of every entry of `list` in the
/// manifests.
fn entries(list: &str) -> Vec<(PathBuf, serde_json::Value)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(zarr_fixtures()).unwrap() {
        let w = e.unwrap().path();
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(w.join("manifest.json")).unwrap()).unwrap();
        for a in m[list].as_array().unwrap() {
            out.push((w.clone(), a.clone()));
        }
    }
    out
}

/// (writer's directory, array path) of every array in the manifests.
fn arrays() -> Vec<(PathBuf, String)> {
    let out: Vec<_> = entries("arrays")
        .into_iter()
        .map(|(w, a)| (w, a["path"].as_str().unwrap().to_string()))
        .collect();
    assert!(out.len() >= 43, "{out:?}");
    out
}

fn open(dir: &Path) -> bloscfs_zarr::Result<ZarrArray> {
    ZarrArray::open(Arc::new(DirStore::new(dir)))
}

fn read_all(a: &ZarrArray) -> Vec<u8> {
    let mut v = vec![0u8; a.npy_len() as usize];
    assert_eq!(a.read_npy_at(0, &mut v).unwrap(), v.len());
    v
}

/// What zarr-python read from `rel`, as the `.npy` bloscfs presents.
fn expected(w: &Path, rel: &str) -> Vec<u8> {
    let numpy = std::fs::read(w.join("expected").join(format!("{rel}.npy"))).unwrap();
    npy::as_bloscfs_shows(&numpy)
}

#[test]
fn every_array_reads_as_zarr_python_reads_it() {
    let mut read = 0;
    for (w, rel) in arrays() {
        let a = open(&w.join("stores").join(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let want = expected(&w, &rel);
        assert!(read_all(&a) == want, "{}: {rel}", w.display());
        // Every window of a few sizes, at every offset of a stride.
        for size in [1usize, 3, 17, 64] {
            for off in (0..want.len()).step_by(13) {
                let mut buf = vec![0u8; size];
                let n = a.read_npy_at(off as u64, &mut buf).unwrap();
                let end = (off + size).min(want.len());
                assert_eq!(&buf[..n], &want[off..end], "{rel} at {off}+{size}");
            }
        }
        read += 1;
    }
    assert_eq!(read, 53);
}

#[test]
fn unsupported_arrays_are_refused_saying_why() {
    let all = entries("unsupported");
    assert_eq!(all.len(), 5);
    for (w, u) in all {
        let rel = u["path"].as_str().unwrap();
        let e = match open(&w.join("stores").join(rel)) {
            Err(e) => e,
            Ok(_) => panic!("{rel} opened"),
        };
        assert_eq!(e.kind, ErrorKind::Unsupported, "{rel}: {e}");
        assert!(e.reason.contains(u["why"].as_str().unwrap()), "{rel}: {e}");
    }
}

#[test]
fn a_small_read_decodes_one_chunk() {
    let dir = zarr_fixtures().join("z3-3.1.6/stores/zstd.zarr");
    let a = open(&dir).unwrap();
    let mut buf = [0u8; 8];
    let h = a.npy_header().len() as u64;
    // Element (1, 5): chunk (0, 1).
    a.read_npy_at(h + (8 + 5) * 8, &mut buf).unwrap();
    assert_eq!(i64::from_le_bytes(buf), 13);
    assert_eq!(a.decodes(), 1);
    // A read of the whole array decodes each stored chunk once.
    read_all(&a);
    assert_eq!(a.decodes(), 3);
}

/// A copy of the fixture array `rel` of writer `w` in a temporary directory.
fn copy_of(w: &str, rel: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let from = zarr_fixtures().join(w).join("stores").join(rel);
    let to = tmp.path().join("a");
    copy_dir(&from, &to);
    (tmp, to)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let t = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

/// Read all of `a`, expecting an error of `kind` naming `key`.
fn fails_at(a: &ZarrArray, kind: ErrorKind, key: &str) {
    let mut v = vec![0u8; a.npy_len() as usize];
    let e = a.read_npy_at(0, &mut v).unwrap_err();
    assert_eq!(e.kind, kind, "{e}");
    assert!(e.reason.contains(key), "{e}");
}

#[test]
fn damaged_chunks_are_errors_naming_their_key() {
    // A flipped byte under a crc32c.
    let (_t, d) = copy_of("z3-3.1.6", "group.zarr/sub/z");
    let p = d.join("c/0/1");
    let mut b = std::fs::read(&p).unwrap();
    b[0] ^= 1;
    std::fs::write(&p, &b).unwrap();
    fails_at(&open(&d).unwrap(), ErrorKind::Checksum, "c/0/1");
    // A truncated Blosc chunk.
    let (_t, d) = copy_of("z2-2.18.7", "lz4.zarr");
    let p = d.join("0.1");
    let b = std::fs::read(&p).unwrap();
    std::fs::write(&p, &b[..b.len() / 2]).unwrap();
    let mut v = vec![0u8; open(&d).unwrap().npy_len() as usize];
    let e = open(&d).unwrap().read_npy_at(0, &mut v).unwrap_err();
    assert!(e.reason.contains("0.1"), "{e}");
    // A zstd chunk of another chunk shape: decodes to the wrong size.
    let (_t, d) = copy_of("z3-3.1.6", "zstd.zarr");
    let meta = d.join("zarr.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    std::fs::write(
        &meta,
        text.replacen(
            "\"chunk_shape\": [\n        4,",
            "\"chunk_shape\": [\n        3,",
            1,
        ),
    )
    .unwrap();
    fails_at(&open(&d).unwrap(), ErrorKind::Corrupt, "c/0/0");
}

#[test]
fn a_damaged_chunk_under_each_filter_fails_only_its_reads() {
    let mut seen = 0;
    for (w, rel) in arrays() {
        if !rel.starts_with("filters.zarr/") {
            continue;
        }
        let wname = w.file_name().unwrap().to_str().unwrap();
        let (_t, d) = copy_of(wname, &rel);
        let a = open(&d).unwrap();
        let m = a.meta();
        let key = bloscfs_zarr::grid::chunk_key(m.keys, &vec![0; m.shape.len()]);
        let p = d.join(&key);
        let b = std::fs::read(&p).unwrap();
        std::fs::write(&p, &b[..b.len() - 3]).unwrap();
        let a = open(&d).unwrap();
        let mut v = vec![0u8; a.npy_len() as usize];
        let e = a.read_npy_at(0, &mut v).unwrap_err();
        assert!(e.reason.contains(&key), "{rel}: {e}");
        // The last element is in another chunk: read as zarr-python reads it.
        let want = expected(&w, &rel);
        let size = m.dtype.size as usize;
        let mut buf = vec![0u8; size];
        let off = want.len() - size;
        assert_eq!(a.read_npy_at(off as u64, &mut buf).unwrap(), size, "{rel}");
        assert_eq!(buf, want[off..], "{rel}");
        seen += 1;
    }
    assert_eq!(seen, 14);
    // A whole chunk of another array (Blosc, 6 float32 where 4 are due).
    let (_t, d) = copy_of("z2-2.18.7", "filters.zarr/astype");
    let other = zarr_fixtures().join("z2-2.18.7/stores/filters.zarr/lossy/0");
    std::fs::copy(other, d.join("0.0")).unwrap();
    fails_at(&open(&d).unwrap(), ErrorKind::Corrupt, "0.0");
}
