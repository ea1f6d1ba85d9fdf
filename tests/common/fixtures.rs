//! Fixture helpers shared by the integration tests of both crates (the
//! library's include this file by path): they need only `blosc_decode` and
//! `bloscfs_pool` (the runner the daemon decodes ahead with).
#![allow(dead_code)]

#[path = "npy.rs"]
mod npy;
pub use npy::*;

use blosc_decode::Env;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An environment with a cache of `cache_bytes` decoding ahead on a pool of
/// `workers` threads (0: a pool that runs nothing).
pub fn pooled(cache_bytes: u64, workers: usize) -> Env {
    Env::with_runner(cache_bytes, Arc::new(bloscfs_pool::Pool::new(workers)))
}

/// An environment with a cache of `cache_bytes` decoding ahead on a thread
/// per CPU, as the daemon's.
pub fn per_cpu(cache_bytes: u64) -> Env {
    Env::with_runner(cache_bytes, Arc::new(bloscfs_pool::Pool::per_cpu()))
}

/// The workspace root, which holds `tests/fixtures` and `tests/data`: the
/// first ancestor of the crate under test that has them.
pub fn root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .find(|p| p.join("tests/fixtures/manifest.json").is_file())
        .unwrap_or(here)
        .to_path_buf()
}

/// The committed fixtures written by the reference producers.
pub fn fixtures() -> PathBuf {
    root().join("tests/fixtures")
}

pub fn fixture(rel: &str) -> PathBuf {
    fixtures().join(rel)
}

/// Copy a file or directory tree.
pub fn copy(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            copy(&e.path(), &to.join(e.file_name()));
        }
    } else {
        std::fs::copy(from, to).unwrap();
    }
}

/// The entry of the list `list` in the JSON manifest at `manifest` whose
/// `path` is `rel`.
pub fn manifest_entry(manifest: &Path, list: &str, rel: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(manifest).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == rel)
        .unwrap_or_else(|| panic!("{rel} not in the manifest"))
        .clone()
}

/// The reference bytes of a fixture: its whole content as read through the
/// library, checked against the manifest's SHA-256 (the reference library's;
/// for a `.npy`, of the bytes `numpy.save` writes: [`as_numpy_saves`]).
pub fn reference_bytes(rel: &str) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let f = manifest_entry(&fixtures().join("manifest.json"), "fixtures", rel);
    let c = blosc_decode::open_path(&fixture(rel)).unwrap().unwrap();
    let mut buf = vec![0u8; c.len() as usize];
    assert_eq!(c.read_at(0, &mut buf).unwrap(), buf.len());
    assert_eq!(
        format!("{:x}", Sha256::digest(as_numpy_saves(&buf))),
        f["sha256"].as_str().unwrap(),
        "{rel}"
    );
    buf
}

/// `blocks-lz4.b2frame` with 64 bytes in the middle of chunk 1's streams
/// flipped, written to `dir/damaged.b2frame`; returns its path.
pub fn damaged_copy(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("damaged.b2frame");
    let mut bytes = std::fs::read(fixture("frame/blocks-lz4.b2frame")).unwrap();
    let good = blosc_decode::open_path(&fixture("frame/blocks-lz4.b2frame"))
        .unwrap()
        .unwrap();
    let bad_at = match good.chunks()[1].loc {
        blosc_decode::index::ChunkLoc::Stored { offset, .. } => offset as usize + 3000,
        _ => unreachable!(),
    };
    for b in &mut bytes[bad_at..bad_at + 64] {
        *b ^= 0x5a;
    }
    std::fs::write(&p, &bytes).unwrap();
    p
}
