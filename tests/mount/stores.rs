//! `.b2z` stores through a real mount: each store a directory, its members
//! read as python-blosc2 reads them (the manifest of
//! scripts/fixtures/gen_store_fixtures.py), a deflated member EIO with a
//! log line naming it, the rest of the mount still served.

use crate::common::*;
use crate::mount::Mount;
use sha2::{Digest, Sha256};

#[test]
fn store_members_read_through_the_mount() {
    if !fuse_available() {
        return;
    }
    let fixtures = std::fs::read_dir(fixture("stores"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("manifest.json").is_file())
        .unwrap();
    let m = Mount::prepare();
    for f in ["dict.b2z", "deflated.b2z"] {
        copy(&fixtures.join(f), &m.src().join(f));
    }
    let (mut m, log) = m.mount_logged(&[]);
    let mp = m.mp();
    let text = std::fs::read_to_string(fixtures.join("manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut read = 0;
    for f in manifest["files"].as_array().unwrap() {
        let rel = f["presented"].as_str().unwrap();
        if !rel.starts_with("dict.b2z/") {
            continue;
        }
        let got = std::fs::read(mp.join(rel)).unwrap();
        let sha = format!("{:x}", Sha256::digest(&got));
        assert_eq!(sha, f["sha256"].as_str().unwrap(), "{rel}");
        read += 1;
    }
    assert_eq!(read, 3, "members of dict.b2z in the manifest");
    assert!(mp.join("dict.b2z/grp").is_dir());
    let err = std::fs::read(mp.join("deflated.b2z/a.b2nd")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(std::fs::read(mp.join("grid.npy")).is_ok());
    m.unmount_without_panic(&log);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("deflated.b2z") && text.contains("not stored as its own bytes"),
        "{text}"
    );
}
