//! Frames python-blosc2 saves beside plain arrays (`scripts/fixtures/gen_saved.py`,
//! written by python-blosc2 2.0.0, 4.4.5 and 4.14.1 into `tests/fixtures/saved`):
//! frames saved by `save_tensor`/`save_array`/`pack_tensor` are `.npy`
//! files equal to `numpy.save` of what `blosc2.load_tensor` returns; a
//! delta-filtered chunk whose last block is shorter than one item (bytes
//! C-Blosc2's encoder never stores) fails for that block only, never with other bytes.

use crate::common;

use bloscfs::fs::{Fs, FsOptions, ROOT_INO};
use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_bloscfs");

/// Every manifest entry of `kind`, with its file's path.
fn entries(kind: &str) -> Vec<(PathBuf, serde_json::Value)> {
    let dir = common::fixture("saved");
    let mut out = Vec::new();
    for w in ["2.0.0", "4.4.5", "4.14.1"] {
        let text = std::fs::read_to_string(dir.join(w).join("manifest.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for f in v["fixtures"].as_array().unwrap() {
            if f["kind"] == kind {
                out.push((dir.join(f["path"].as_str().unwrap()), f.clone()));
            }
        }
    }
    out
}

fn sha(b: &[u8]) -> String {
    format!("{:x}", Sha256::digest(b))
}

fn cat(path: &std::path::Path, range: Option<(u64, u64)>) -> std::process::Output {
    let mut c = Command::new(BIN);
    c.arg("cat");
    if let Some((o, l)) = range {
        c.args(["--offset", &o.to_string(), "--length", &l.to_string()]);
    }
    c.arg(path).output().unwrap()
}

#[test]
fn saved_tensors_are_npy_as_load_tensor_reads_them() {
    let all = entries("tensor");
    assert!(all.len() >= 17, "{}", all.len());
    for (path, f) in &all {
        let probe = blosc_decode::detect::probe_path(path).unwrap().unwrap();
        let name = bloscfs::names::presented_name(path.file_name().unwrap(), probe.npy);
        assert_eq!(name, OsStr::new(f["presented"].as_str().unwrap()), "{f}");
        let o = cat(path, None);
        assert!(
            o.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(probe.len, o.stdout.len() as u64, "{f}");
        let numpy = common::as_numpy_saves(&o.stdout);
        assert_eq!(numpy.len() as u64, f["len"].as_u64().unwrap(), "{f}");
        assert_eq!(sha(&numpy), f["sha256"].as_str().unwrap(), "{f}");
        let info = Command::new(BIN).arg("info").arg(path).output().unwrap();
        let info = String::from_utf8_lossy(&info.stdout);
        assert!(info.contains("presented as:  .npy"), "{f}: {info}");
        assert!(info.contains("saved tensor:  numpy"), "{f}: {info}");
    }
}

/// Through the presented tree: the name, the size and the bytes.
#[test]
fn saved_tensors_in_the_tree() {
    let d = tempfile::tempdir().unwrap();
    let all = entries("tensor");
    let (path, f) = all
        .iter()
        .find(|(p, _)| p.ends_with("4.14.1/tensor-struct.b2frame"))
        .unwrap();
    std::fs::copy(path, d.path().join("tensor-struct.b2frame")).unwrap();
    let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
    let a = fs
        .lookup(ROOT_INO, OsStr::new("tensor-struct.npy"))
        .unwrap();
    let (fh, _) = fs.open(a.ino, false).unwrap();
    let got = fs.read(fh, 0, 1 << 20).unwrap();
    assert_eq!(a.size, got.len() as u64);
    let numpy = common::as_numpy_saves(&got);
    assert_eq!(numpy.len() as u64, f["len"].as_u64().unwrap());
    assert_eq!(sha(&numpy), f["sha256"].as_str().unwrap());
}

#[test]
fn delta_partial_item_is_refused_not_guessed() {
    let all = entries("delta-partial");
    assert_eq!(all.len(), 2);
    for (path, f) in &all {
        // What the writer itself reads back is not what it was given.
        assert_ne!(f["writer_reads_last_byte"], f["written_last_byte"], "{f}");
        let n = f["nbytes"].as_u64().unwrap();
        let whole = n / 8 * 8;
        assert!(whole < n);
        let o = cat(path, Some((0, whole)));
        assert!(
            o.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(sha(&o.stdout), f["whole_items_sha256"].as_str().unwrap());
        for range in [None, Some((n - 1, 1)), Some((whole - 3, 4))] {
            let o = cat(path, range);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "{f} {range:?}: read");
            assert!(
                err.contains("chunk 0") && err.contains("less than one 8-byte item"),
                "{f} {range:?}: {err}"
            );
        }
        // Through the tree: EIO for the partial item only.
        let d = tempfile::tempdir().unwrap();
        std::fs::copy(path, d.path().join("d.b2frame")).unwrap();
        let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
        let a = fs.lookup(ROOT_INO, OsStr::new("d")).unwrap();
        assert_eq!(a.size, n);
        let (fh, _) = fs.open(a.ino, false).unwrap();
        assert_eq!(fs.read(fh, n - 1, 1).map_err(|e| e.errno()), Err(libc::EIO));
        assert_eq!(fs.read(fh, whole - 8, 8).unwrap().len(), 8);
    }
}

/// A saved lazy expression or UDF holds no values (its chunks were never
/// written): it passes through raw under its own name, never as a `.npy`
/// of zeros, and `bloscfs info` says what it is.
#[test]
fn lazy_expressions_pass_through_raw() {
    let all = entries("lazy");
    assert_eq!(all.len(), 4);
    for (path, f) in &all {
        assert!(
            blosc_decode::detect::probe_path(path).unwrap().is_none(),
            "{f}"
        );
        let dir = path.parent().unwrap();
        let fs = Fs::new(dir, &FsOptions::default()).unwrap();
        let name = path.file_name().unwrap();
        let stem = name.to_string_lossy().replace(".b2nd", ".npy");
        assert_eq!(
            fs.lookup(ROOT_INO, OsStr::new(&stem))
                .err()
                .map(|e| e.errno()),
            Some(libc::ENOENT)
        );
        let a = fs.lookup(ROOT_INO, name).unwrap();
        assert_eq!(a.size, f["len"].as_u64().unwrap(), "{f}");
        let (fh, _) = fs.open(a.ino, false).unwrap();
        let got = fs.read(fh, 0, 1 << 20).unwrap();
        assert_eq!(sha(&got), f["sha256"].as_str().unwrap(), "{f}");
        // The operands are arrays, shown as ever.
        assert!(fs.lookup(ROOT_INO, OsStr::new("a.npy")).is_ok());
        // `info` says what it is and what it computes from, as python-blosc2
        // saved it (an expression or a UDF's source, over `a.b2nd`).
        let o = Command::new(BIN).arg("info").arg(path).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let what = if name == "udf.b2nd" {
            "UDF:           def udf("
        } else {
            "expression:    (o"
        };
        for want in [
            "python-blosc2: lazy",
            "data:          none of its own",
            what,
            "a.b2nd",
        ] {
            assert!(out.contains(want), "{f}: {want:?} not in:\n{out}");
        }
    }
}

/// A lazy expression saved as a sparse frame (`contiguous=False`: a
/// directory holding `chunks.b2frame`) holds no values either: it stays
/// a directory of its files, never a `.npy` of zeros; `cat` refuses it and
/// `info` says what it is.
#[test]
fn sparse_lazy_expressions_stay_directories() {
    let all = entries("lazy-sparse");
    assert_eq!(all.len(), 2);
    for (path, f) in &all {
        assert!(
            blosc_decode::detect::probe_path(path).unwrap().is_none(),
            "{f}"
        );
        let fs = Fs::new(path.parent().unwrap(), &FsOptions::default()).unwrap();
        let name = path.file_name().unwrap();
        assert_eq!(
            fs.lookup(ROOT_INO, OsStr::new("expr-sparse.npy"))
                .err()
                .map(|e| e.errno()),
            Some(libc::ENOENT)
        );
        let a = fs.lookup(ROOT_INO, name).unwrap();
        assert_eq!(a.kind, bloscfs::fs::Kind::Dir, "{f}");
        let index = fs.lookup(a.ino, OsStr::new("chunks.b2frame")).unwrap();
        let want = std::fs::read(path.join("chunks.b2frame")).unwrap();
        assert_eq!(index.size, want.len() as u64);
        let o = cat(path, None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && o.stdout.is_empty(), "{f}");
        assert!(err.contains("holds no data of its own"), "{f}: {err}");
        let o = Command::new(BIN).arg("info").arg(path).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        for want in ["python-blosc2: lazy", "expression:    (o", "a.b2nd"] {
            assert!(out.contains(want), "{f}: {want:?} not in:\n{out}");
        }
    }
}
