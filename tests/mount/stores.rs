//! python-blosc2's stores through a real mount: each `.b2z` and `.b2e` a
//! directory, a `.b2d` showing its embedded keys, every leaf read as
//! python-blosc2 reads it (the manifest of
//! scripts/fixtures/gen_store_fixtures.py), a deflated member EIO with a
//! log line naming it, the rest of the mount still served; a CTable's
//! `table.npy` loaded by numpy.

use crate::common::*;
use crate::mount::Mount;
use sha2::{Digest, Sha256};
use std::process::Command;

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
    for f in ["dict.b2z", "deflated.b2z", "embed.b2e", "dict.b2d"] {
        copy(&fixtures.join(f), &m.src().join(f));
    }
    let (mut m, log) = m.mount_logged(&[]);
    let mp = m.mp();
    let text = std::fs::read_to_string(fixtures.join("manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut read = 0;
    for f in manifest["files"].as_array().unwrap() {
        let rel = f["presented"].as_str().unwrap();
        if !["dict.b2z/", "embed.b2e/", "dict.b2d/"]
            .iter()
            .any(|p| rel.starts_with(p))
        {
            continue;
        }
        let got = std::fs::read(mp.join(rel)).unwrap();
        let sha = format!("{:x}", Sha256::digest(as_numpy_saves(&got)));
        assert_eq!(sha, f["sha256"].as_str().unwrap(), "{rel}");
        read += 1;
    }
    assert_eq!(read, 12, "leaves of the stores in the manifest");
    assert!(mp.join("dict.b2z/grp").is_dir());
    assert!(mp.join("embed.b2e/grp").is_dir());
    let mut names: Vec<_> = std::fs::read_dir(mp.join("dict.b2d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["a.npy", "grp", "tiny.npy", "x.npy"]);
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

/// A CTable's `table.npy` through a real mount: `numpy.load` (whole and
/// memory-mapped) gives `numpy.asarray` of the table as python-blosc2 reads
/// it from the source, for a `.b2d` directory and a `.b2z` store.
#[test]
fn ctable_rows_load_through_the_mount() {
    if !fuse_available() {
        return;
    }
    let Some(py) = python() else { return };
    let fixtures = fixture("stores/ctable/b2-4.14.1");
    let m = Mount::prepare();
    for t in ["kinds.b2d", "kinds.b2z", "big.b2d"] {
        copy(&fixtures.join(t), &m.src().join(t));
    }
    let (mut m, log) = m.mount_logged(&[]);
    let mp = m.mp();
    let got = std::fs::read(mp.join("kinds.b2z/table.npy")).unwrap();
    let want = std::fs::read(fixtures.join("expected/kinds_b2z.npy")).unwrap();
    assert_eq!(as_numpy_saves(&got), want);
    let script = format!(
        "import numpy as np, blosc2\n\
         for t in ('kinds.b2d', 'kinds.b2z', 'big.b2d'):\n\
         \x20   ref = np.asarray(blosc2.open('{src}/' + t, mode='r'))\n\
         \x20   a = np.load('{mp}/' + t + '/table.npy')\n\
         \x20   assert a.dtype == ref.dtype and a.shape == ref.shape, t\n\
         \x20   assert (a == ref).all(), t\n\
         \x20   mm = np.load('{mp}/' + t + '/table.npy', mmap_mode='r')\n\
         \x20   assert mm.dtype == ref.dtype and (mm[::7] == ref[::7]).all(), t\n\
         \x20   assert (mm[-3:] == ref[-3:]).all(), t\n\
         \x20   del mm\n\
         print('ok')\n",
        mp = mp.display(),
        src = m.src().display()
    );
    let o = Command::new(&py).arg("-c").arg(script).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    m.unmount_without_panic(&log);
}
