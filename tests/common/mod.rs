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
