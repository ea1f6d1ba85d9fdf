//! Zarr stores written by zarr-python 2.18 and 3.1
//! (scripts/fixtures/gen_zarr.py, fixtures in tests/fixtures/zarr): every
//! file inside a store is presented under its own name with its source
//! bytes, so zarr-python reads the store through the mount; a Blosc chunk
//! outside any store is still presented decoded.

use crate::common;
use bloscfs::fs::{Attr, Fs, FsOptions, Kind, ROOT_INO};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Each writer's fixture directory (`zN-VERSION`).
fn writers() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(common::fixture("zarr"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("manifest.json").is_file())
        .collect();
    out.sort();
    assert_eq!(out.len(), 2, "{out:?}");
    out
}

/// The inode presented at `rel` (`/`-separated).
fn lookup(fs: &Fs, rel: &str) -> Attr {
    let mut attr = fs.getattr(ROOT_INO).unwrap();
    for part in rel.split('/') {
        attr = fs
            .lookup(attr.ino, OsStr::new(part))
            .unwrap_or_else(|e| panic!("{rel}: {part}: errno {e}"));
    }
    attr
}

/// The whole content of the presented file `ino`.
fn read_all(fs: &Fs, ino: u64) -> Vec<u8> {
    let (fh, _) = fs.open(ino, false).unwrap();
    let mut out = Vec::new();
    loop {
        let got = fs.read(fh, out.len() as u64, 1 << 16).unwrap();
        if got.is_empty() {
            break;
        }
        out.extend(got);
    }
    fs.release(fh);
    out
}

/// Every regular file under `dir`, as paths relative to `root`.
fn files_under(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(root, &p, out);
        } else {
            out.push(p.strip_prefix(root).unwrap().to_str().unwrap().to_string());
        }
    }
}

#[test]
fn every_file_of_every_store_passes_through() {
    for w in writers() {
        let stores = w.join("stores");
        let fs = Fs::new(&stores, &FsOptions::default()).unwrap();
        let mut files = Vec::new();
        files_under(&stores, &stores, &mut files);
        assert!(files.len() > 20, "{files:?}");
        for rel in files {
            let src = std::fs::read(stores.join(&rel)).unwrap();
            let a = lookup(&fs, &rel);
            assert_eq!(a.kind, Kind::File, "{rel}");
            assert_eq!(a.size, src.len() as u64, "{}: {rel}", w.display());
            assert!(read_all(&fs, a.ino) == src, "{}: {rel}", w.display());
        }
    }
}

#[test]
fn a_blosc_chunk_outside_a_store_is_still_decoded() {
    let tmp = tempfile::tempdir().unwrap();
    let chunk = common::fixture("zarr/z2-2.18.7/stores/lz4.zarr/0.0");
    std::fs::copy(&chunk, tmp.path().join("loose.0")).unwrap();
    let fs = Fs::new(tmp.path(), &FsOptions::default()).unwrap();
    // zarr-python 2 wrote it: 4x3 int32 values, Blosc lz4.
    assert_eq!(lookup(&fs, "loose.0").size, 4 * 3 * 4);
}
