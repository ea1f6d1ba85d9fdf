//! python-blosc2's CTables (scripts/fixtures/gen_ctable.py, fixtures in
//! tests/fixtures/stores/ctable, written by 4.2.0 and the current
//! release): each table's directory (`.b2d`, or `.b2z` store) shows
//! `table.npy`, the bytes `numpy.save` writes for `numpy.asarray(table)`
//! (valid rows only, fields in schema order), beside its columns; through
//! the presented tree and `bloscfs cat`/`info`. A table whose parts
//! disagree has no `table.npy`, and its columns are still shown.

use crate::common;
use bloscfs::fs::{Fs, FsOptions, Kind, ROOT_INO};
use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The tables of every writer's fixtures.
const TABLES: [&str; 4] = ["kinds.b2d", "kinds.b2z", "big.b2d", "spare.b2d"];

/// Every writer's fixture directory.
fn writers() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(common::fixture("stores/ctable"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    out.sort();
    assert_eq!(out.len(), 2, "{out:?}");
    out
}

/// What python-blosc2 reads for table `name`: the length and SHA-256 of
/// its `.npy` as `numpy.save` writes it.
fn expected(dir: &Path, name: &str) -> (u64, String) {
    let stem = dir.join("expected").join(name.replace('.', "_"));
    let npy = stem.with_extension("npy");
    if let Ok(b) = std::fs::read(&npy) {
        return (b.len() as u64, format!("{:x}", Sha256::digest(&b)));
    }
    let text = std::fs::read_to_string(stem.with_extension("npy.sha256")).unwrap();
    let (len, sha) = text.trim().split_once(' ').unwrap();
    (len.parse().unwrap(), sha.to_string())
}

/// The attributes presented at `rel` (`/`-separated), or the errno.
fn lookup(fs: &Fs, rel: &str) -> Result<bloscfs::fs::Attr, i32> {
    let mut ino = ROOT_INO;
    let mut attr = None;
    for part in rel.split('/') {
        let a = fs.lookup(ino, OsStr::new(part)).map_err(|e| e.errno())?;
        ino = a.ino;
        attr = Some(a);
    }
    Ok(attr.unwrap())
}

/// All of a presented file, read in pieces of `step` bytes.
fn read_all(fs: &Fs, ino: u64, size: u64, step: u32) -> Vec<u8> {
    let (fh, _) = fs.open(ino, false).unwrap();
    let mut out = Vec::new();
    while (out.len() as u64) < size {
        let got = fs.read(fh, out.len() as u64, step).unwrap();
        assert!(!got.is_empty(), "short at {}", out.len());
        out.extend_from_slice(&got);
    }
    assert!(fs.read(fh, size, step).unwrap().is_empty());
    fs.release(fh);
    out
}

#[test]
fn table_npy_is_what_python_blosc2_reads() {
    for dir in writers() {
        let fs = Fs::new(&dir, &FsOptions::default()).unwrap();
        for t in TABLES {
            let top = lookup(&fs, t).unwrap();
            assert_eq!(top.kind, Kind::Dir, "{t}");
            let names = common::names(&fs, top.ino);
            assert!(names.contains(&"table.npy".to_string()), "{t}: {names:?}");
            assert!(names.contains(&"_cols".to_string()), "{t}: {names:?}");
            let a = lookup(&fs, &format!("{t}/table.npy")).unwrap();
            let (len, sha) = expected(&dir, t);
            assert_eq!(a.kind, Kind::File, "{t}");
            // Pieces that start and end inside records and the header.
            for step in [997, 128 << 10] {
                let got = common::as_numpy_saves(&read_all(&fs, a.ino, a.size, step));
                assert_eq!(got.len() as u64, len, "{}/{t}", dir.display());
                let got = format!("{:x}", Sha256::digest(&got));
                assert_eq!(got, sha, "{}/{t} in reads of {step}", dir.display());
            }
        }
    }
}

#[test]
fn columns_stay_shown_at_full_capacity() {
    for dir in writers() {
        let fs = Fs::new(&dir, &FsOptions::default()).unwrap();
        let cols = lookup(&fs, "kinds.b2z/_cols").unwrap();
        let names = common::names(&fs, cols.ino);
        assert!(names.contains(&"c128.npy".to_string()), "{names:?}");
        assert!(names.contains(&"name.npy".to_string()), "{names:?}");
        assert!(lookup(&fs, "spare.b2d/_cols/a.npy").is_ok());
    }
}

#[test]
fn cat_and_info_of_a_table() {
    for dir in writers() {
        for t in TABLES {
            let path = dir.join(t).join("table.npy");
            let out = Command::new(common::bin())
                .arg("cat")
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let (len, sha) = expected(&dir, t);
            let got = common::as_numpy_saves(&out.stdout);
            assert_eq!(got.len() as u64, len, "{}", path.display());
            assert_eq!(format!("{:x}", Sha256::digest(&got)), sha);
        }
        let path = dir.join("kinds.b2d/table.npy");
        let out = Command::new(common::bin())
            .args(["cat", "--offset", "300", "--length", "100"])
            .arg(&path)
            .output()
            .unwrap();
        let want = std::fs::read(dir.join("expected/kinds_b2d.npy")).unwrap();
        assert_eq!(out.stdout, common::as_bloscfs_shows(&want)[300..400]);
        let out = Command::new(common::bin())
            .arg("info")
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("CTable"), "{text}");
        assert!(
            text.contains("rows:          40 of a capacity of"),
            "{text}"
        );
        assert!(text.contains("fields:        i8 |i1, u16 <u2,"), "{text}");
        assert!(text.contains("name <U5, raw |S3"), "{text}");
    }
}

/// A table whose schema, columns or mask disagree has no `table.npy`: its
/// lookup fails, `bloscfs cat` says why, its columns are still shown.
#[test]
fn lying_tables_have_no_table_file() {
    for dir in writers() {
        let lying = dir.join("lying");
        let fs = Fs::new(&lying, &FsOptions::default()).unwrap();
        for (t, why) in [
            ("rows.b2d", "schema says 7 rows"),
            ("kind.b2d", "does not fit the schema's kind float64"),
            ("short.b2d", "999 rows where"),
            ("missing.b2d", "_cols/b.b2nd"),
            ("mask.b2d", "not a bool array"),
        ] {
            let top = lookup(&fs, t).unwrap();
            let names = common::names(&fs, top.ino);
            assert!(!names.contains(&"table.npy".to_string()), "{t}: {names:?}");
            assert!(names.contains(&"_cols".to_string()), "{t}: {names:?}");
            let err = lookup(&fs, &format!("{t}/table.npy")).err();
            assert_eq!(err, Some(libc::ENOENT), "{t}");
            let a = lookup(&fs, &format!("{t}/_cols/a.npy")).unwrap();
            assert!(!read_all(&fs, a.ino, a.size, 4096).is_empty());
            let out = Command::new(common::bin())
                .arg("cat")
                .arg(lying.join(t).join("table.npy"))
                .output()
                .unwrap();
            assert!(!out.status.success(), "{t}");
            assert!(out.stdout.is_empty(), "{t}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(why), "{t}: {err}");
        }
    }
}
