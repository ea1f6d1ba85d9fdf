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

/// The bytes of `path` from `from` on (an error is its errno).
fn read_from(path: &std::path::Path, from: u64) -> Result<Vec<u8>, i32> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).map_err(|e| e.raw_os_error().unwrap_or(0))?;
    let len = f.metadata().unwrap().len();
    let mut buf = vec![0; (len - from) as usize];
    f.read_exact_at(&mut buf, from)
        .map_err(|e| e.raw_os_error().unwrap_or(0))?;
    Ok(buf)
}

#[test]
fn a_corrupt_chunk_is_eio_and_one_log_line_naming_array_and_key() {
    if !fuse_available() {
        return;
    }
    let m = Mount::prepare();
    let src = m.src();
    let cases = [
        ("z2-2.18.7", "lz4.zarr", "0.0", true),
        ("z3-3.1.6", "zstd.zarr", "c/0/0", false),
    ];
    for (w, store, key, truncate) in cases {
        copy(
            &fixture(&format!("zarr/{w}/stores/{store}")),
            &src.join(store),
        );
        let chunk = src.join(store).join(key);
        let mut bytes = std::fs::read(&chunk).unwrap();
        if truncate {
            bytes.truncate(bytes.len() / 2);
        } else {
            let n = bytes.len();
            bytes[n / 2..].iter_mut().for_each(|b| *b ^= 0x5a);
        }
        std::fs::write(&chunk, bytes).unwrap();
    }
    let (mut m, log) = m.mount_logged(&[]);
    for (_, store, _, _) in cases {
        let npy = m.mp().join(store.replace(".zarr", ".npy"));
        for _ in 0..3 {
            assert_eq!(read_from(&npy, 0), Err(libc::EIO), "{store}");
        }
    }
    m.unmount_without_panic(&log);
    let text = std::fs::read_to_string(&log).unwrap();
    for (_, store, key, _) in cases {
        let named: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.contains(&store.replace(".zarr", ".npy")) && l.contains(&format!("chunk {key}:"))
            })
            .collect();
        assert_eq!(named.len(), 1, "{store} {key}:\n{text}");
    }
}
