//! Zarr stores through a real mount (fixtures of zarr-python 2.18 and 3.1,
//! `scripts/fixtures/gen_zarr.py`): every file of every store reads as its
//! source, each array's `.npy` opens in numpy whole and memory-mapped and
//! reads random windows as zarr-python read the array, and zarr-python
//! reads the stores through the mount (`tests/zarr_check.py`).

use crate::common::*;
use crate::mount::Mount;
use std::path::Path;
use std::process::Command;

/// Every file under `dir` (relative paths).
fn files(top: &Path, dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            files(top, &e.path(), out);
        } else {
            out.push(e.path().strip_prefix(top).unwrap().to_path_buf());
        }
    }
}

#[test]
fn zarr_stores_and_their_npy_files_through_the_mount() {
    if !fuse_available() {
        return;
    }
    let py = python().expect("python with numpy and zarr (scripts/setup.sh)");
    let m = Mount::prepare();
    let src = m.src().join("zarr");
    copy(&fixture("zarr"), &src);
    let (mut m, log) = m.mount_logged(&[]);
    let mnt = m.mp().join("zarr");
    let mut all = Vec::new();
    files(&src, &src, &mut all);
    // The files inside each writer's `stores/`.
    let in_stores = |p: &&std::path::PathBuf| {
        p.components()
            .nth(1)
            .is_some_and(|c| c.as_os_str() == "stores")
    };
    let stored: Vec<_> = all.iter().filter(in_stores).collect();
    assert!(stored.len() > 50, "{} store files", stored.len());
    for rel in &stored {
        let want = std::fs::read(src.join(rel)).unwrap();
        let got = std::fs::read(mnt.join(rel)).unwrap_or_else(|e| panic!("{rel:?}: {e}"));
        assert!(got == want, "{rel:?}: other bytes through the mount");
    }
    let o = Command::new(&py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zarr_check.py"))
        .arg(&mnt)
        .arg(&src)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    m.unmount_without_panic(&log);
}
