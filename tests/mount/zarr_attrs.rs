//! Zarr attributes through a real mount with `-o xattr`: `os.listxattr` and
//! `os.getxattr` of an array's `.npy` give its attributes as JSON text
//! (zarr-python 2.18 and 3.1 fixtures), and a bad `.zattrs` gives none,
//! one log line however often it is asked, and a `.npy` that still loads.

use crate::common::*;
use crate::mount::Mount;
use std::process::Command;

const CHECK: &str = r#"
import json, os, sys
import numpy as np
mnt = sys.argv[1]
for name in ["lz4.npy", "zstd.npy"]:
    p = os.path.join(mnt, name)
    names = sorted(n for n in os.listxattr(p) if n.startswith("user.zarr."))
    assert names == ["user.zarr.note", "user.zarr.scale", "user.zarr.units"], names
    got = {n[len("user.zarr."):]: json.loads(os.getxattr(p, n)) for n in names}
    want = {"units": "m", "scale": [1, 2.5], "note": {"by": "gen_zarr", "ok": True}}
    assert got == want, (name, got)
    np.load(p)
bad = os.path.join(mnt, "bad.npy")
for _ in range(3):
    assert not [n for n in os.listxattr(bad) if n.startswith("user.zarr.")]
    try:
        os.getxattr(bad, "user.zarr.units")
        raise SystemExit("bad.npy has user.zarr.units")
    except OSError as e:
        assert e.errno == 61, e
assert np.load(bad).shape == (10, 7)
print("ok")
"#;

#[test]
fn zarr_attributes_are_xattrs_of_the_npy_through_the_mount() {
    if !fuse_available() {
        return;
    }
    let py = python().expect("python with numpy (scripts/setup.sh)");
    let m = Mount::prepare();
    let src = m.src();
    copy(
        &fixture("zarr/z2-2.18.7/stores/lz4.zarr"),
        &src.join("lz4.zarr"),
    );
    copy(
        &fixture("zarr/z3-3.1.6/stores/zstd.zarr"),
        &src.join("zstd.zarr"),
    );
    copy(
        &fixture("zarr/z2-2.18.7/stores/lz4.zarr"),
        &src.join("bad.zarr"),
    );
    std::fs::write(src.join("bad.zarr/.zattrs"), b"{\"units\": ").unwrap();
    let (mut m, log) = m.mount_logged(&["-o", "xattr"]);
    let o = Command::new(&py)
        .args(["-c", CHECK])
        .arg(m.mp())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    m.unmount_without_panic(&log);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("attributes not shown"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("bad.zarr"), "{text}");
}
