//! Zarr stores written by zarr-python 2.18 and 3.1
//! (scripts/fixtures/gen_zarr.py, fixtures in tests/fixtures/zarr): every
//! file inside a store is presented under its own name with its source
//! bytes, so zarr-python reads the store through the mount; a Blosc chunk
//! outside any store is still presented decoded. Each array is also a
//! `.npy` file beside its directory whose bytes are those `numpy.save`
//! writes for what zarr-python reads (the generator's expected files), in
//! the tree and through `bloscfs cat`; `bloscfs info` describes it.

use crate::common;
use crate::source_tree::Counting;
use bloscfs::fs::{Attr, Fs, FsOptions, Kind, LocalTree, ROOT_INO};
use parking_lot::Mutex;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

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
pub(crate) fn lookup(fs: &Fs, rel: &str) -> Attr {
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

/// Each array of writer `w`'s manifest: its path in the store.
fn manifest_arrays(w: &Path) -> Vec<String> {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.join("manifest.json")).unwrap()).unwrap();
    m["arrays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap().to_string())
        .collect()
}

/// The presented `.npy` path of array `rel`: `.zarr` dropped, `.npy` added.
fn npy_of(rel: &str) -> String {
    format!("{}.npy", rel.strip_suffix(".zarr").unwrap_or(rel))
}

/// What zarr-python read from array `rel`, as the `.npy` bloscfs presents.
fn expected(w: &Path, rel: &str) -> Vec<u8> {
    let numpy = std::fs::read(w.join("expected").join(format!("{rel}.npy"))).unwrap();
    common::as_bloscfs_shows(&numpy)
}

#[test]
fn every_array_is_a_npy_of_what_zarr_python_reads() {
    let mut seen = 0;
    for w in writers() {
        let fs = Fs::new(&w.join("stores"), &FsOptions::default()).unwrap();
        for rel in manifest_arrays(&w) {
            let npy = npy_of(&rel);
            let (parent, name) = npy.rsplit_once('/').unwrap_or(("", &npy));
            let ino = match parent {
                "" => ROOT_INO,
                p => lookup(&fs, p).ino,
            };
            let listed = common::names(&fs, ino);
            assert!(listed.contains(&name.to_string()), "{rel}: {listed:?}");
            let a = lookup(&fs, &npy);
            let want = expected(&w, &rel);
            assert_eq!(a.size, want.len() as u64, "{rel}");
            assert!(read_all(&fs, a.ino) == want, "{}: {rel}", w.display());
            seen += 1;
        }
    }
    assert_eq!(seen, 53);
}

/// (path, the word the reason names) of writer `w`'s arrays that are not
/// presented.
fn manifest_unsupported(w: &Path) -> Vec<(String, String)> {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.join("manifest.json")).unwrap()).unwrap();
    let s = |v: &serde_json::Value| v.as_str().unwrap().to_string();
    m["unsupported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (s(&a["path"]), s(&a["why"])))
        .collect()
}

#[test]
fn an_unsupported_array_has_no_npy_and_info_says_why() {
    let mut seen = 0;
    for w in writers() {
        let fs = Fs::new(&w.join("stores"), &FsOptions::default()).unwrap();
        for (rel, why) in manifest_unsupported(&w) {
            let (parent, name) = rel.rsplit_once('/').unwrap();
            let ino = lookup(&fs, parent).ino;
            let listed = common::names(&fs, ino);
            // The store's own directory passes through, without a `.npy`.
            assert!(listed.contains(&name.to_string()), "{rel}: {listed:?}");
            assert!(!listed.contains(&format!("{name}.npy")), "{listed:?}");
            assert!(fs.lookup(ino, OsStr::new(&format!("{name}.npy"))).is_err());
            let info = Command::new(common::bin())
                .arg("info")
                .arg(w.join("stores").join(&rel))
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&info.stderr);
            assert!(!info.status.success() && err.contains(&why), "{rel}: {err}");
            seen += 1;
        }
    }
    assert_eq!(seen, 5);
}

#[test]
fn a_real_file_of_the_npy_name_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let from = common::fixture("zarr/z2-2.18.7/stores/lz4.zarr");
    common::copy(&from, &tmp.path().join("lz4.zarr"));
    std::fs::write(tmp.path().join("lz4.npy"), b"mine").unwrap();
    let fs = Fs::new(tmp.path(), &FsOptions::default()).unwrap();
    assert_eq!(
        common::names(&fs, ROOT_INO),
        [".", "..", "lz4.npy", "lz4.zarr"]
    );
    assert_eq!(read_all(&fs, lookup(&fs, "lz4.npy").ino), b"mine");
}

#[test]
fn cat_and_info_of_an_array_directory() {
    for w in writers() {
        for rel in manifest_arrays(&w) {
            let dir = w.join("stores").join(&rel);
            let cat = Command::new(common::bin())
                .arg("cat")
                .arg(&dir)
                .output()
                .unwrap();
            let info = Command::new(common::bin())
                .arg("info")
                .arg(&dir)
                .output()
                .unwrap();
            assert!(
                cat.status.success(),
                "{rel}: {}",
                String::from_utf8_lossy(&cat.stderr)
            );
            let want = expected(&w, &rel);
            assert!(cat.stdout == want, "{rel}");
            let text = String::from_utf8_lossy(&info.stdout);
            assert!(text.contains("shape: ("), "{text}");
            // A window of the values alone.
            let raw = Command::new(common::bin())
                .args(["cat", "--raw", "--offset", "3", "--length", "5"])
                .arg(&dir)
                .output()
                .unwrap();
            let header = want.iter().position(|&b| b == b'\n').unwrap() + 1;
            let end = (header + 8).min(want.len());
            assert_eq!(raw.stdout, &want[header + 3..end], "{rel}");
        }
    }
}

/// The paths asked of the source inside the array directories `arrays`
/// of a copy of writer `w`'s `group.zarr` (its consolidated metadata taken
/// away unless `consolidated`) while the group's arrays are listed and
/// looked up as `.npy` files.
fn asked_inside(w: &str, arrays: &[&str], consolidated: bool) -> Vec<PathBuf> {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let g = root.join("group.zarr");
    common::copy(&common::fixture(&format!("zarr/{w}/stores/group.zarr")), &g);
    if !consolidated {
        std::fs::remove_file(g.join(".zmetadata")).ok();
        let meta = g.join("zarr.json");
        if let Ok(text) = std::fs::read_to_string(&meta) {
            let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
            doc.as_object_mut().unwrap().remove("consolidated_metadata");
            std::fs::write(&meta, doc.to_string()).unwrap();
        }
    }
    let tree = Arc::new(Counting {
        inner: LocalTree::new(root.clone()),
        calls: Mutex::default(),
    });
    let fs = Fs::with_tree(tree.clone(), &FsOptions::default()).unwrap();
    for a in arrays {
        let (parent, name) = a.rsplit_once('/').unwrap_or(("", a));
        let dir = ["group.zarr", parent].join("/");
        let dir = dir.trim_end_matches('/');
        let listed = common::names(&fs, lookup(&fs, dir).ino);
        assert!(listed.contains(&format!("{name}.npy")), "{a}: {listed:?}");
        assert!(lookup(&fs, &format!("{dir}/{name}.npy")).size > 128);
    }
    // Not even whether an array directory is a sparse frame (its
    // `chunks.b2frame`): a directory in a store is none.
    let calls = tree.calls.lock();
    calls
        .keys()
        .map(|(_, p)| p.clone())
        .filter(|p| {
            arrays
                .iter()
                .any(|a| p.starts_with(g.join(a)) && *p != g.join(a))
        })
        .collect()
}

#[test]
fn consolidated_groups_present_arrays_without_looking_inside_them() {
    for (w, arrays) in [
        ("z2-2.18.7", ["a", "sub/b", "sub/c"]),
        ("z3-3.1.6", ["x", "sub/y", "sub/z"]),
    ] {
        let inside = asked_inside(w, &arrays, true);
        assert!(inside.is_empty(), "{w}: {inside:?}");
        // Without it each array's own metadata file is read.
        let inside = asked_inside(w, &arrays, false);
        assert!(inside.len() >= 3, "{w}: {inside:?}");
    }
}
