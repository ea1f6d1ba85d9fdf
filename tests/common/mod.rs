//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
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

/// The reference bytes of a fixture: its whole content as read through the
/// library, checked against the manifest's SHA-256 (the reference library's).
pub fn reference_bytes(rel: &str) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let text = std::fs::read_to_string(fixtures().join("manifest.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let f = v["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == rel)
        .unwrap_or_else(|| panic!("{rel} not in the manifest"));
    let c = bloscfs::open_path(&fixture(rel)).unwrap().unwrap();
    let mut buf = vec![0u8; c.len() as usize];
    assert_eq!(c.read_at(0, &mut buf).unwrap(), buf.len());
    assert_eq!(
        format!("{:x}", Sha256::digest(&buf)),
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
    let good = bloscfs::open_path(&fixture("frame/blocks-lz4.b2frame"))
        .unwrap()
        .unwrap();
    let bad_at = match good.chunks()[1].loc {
        bloscfs::index::ChunkLoc::Stored { offset, .. } => offset as usize + 3000,
        _ => unreachable!(),
    };
    for b in &mut bytes[bad_at..bad_at + 64] {
        *b ^= 0x5a;
    }
    std::fs::write(&p, &bytes).unwrap();
    p
}
