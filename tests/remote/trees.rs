//! Trees whose presentation goes beyond one file per container, from a
//! remote source: python-blosc2's stores (`.b2z` zips and `.b2e`
//! EmbedStores as directories, a `.b2d` DictStore with its embedded keys,
//! a BatchArray, a store that cannot be read) and Zarr stores (passed
//! through, each array also a `.npy`). Through S3 and plain HTTP the mount
//! shows the tree the local source shows (itself checked against the
//! writers in tests/fs/stores.rs and tests/fs/zarr.rs), name for name and
//! byte for byte, and what cannot be read fails there too.

use crate::common::*;
use crate::harness::*;
use crate::servers::*;
use bloscfs::fs::{Fs, FsOptions, Kind, ROOT_INO};
use std::collections::BTreeMap;
use std::path::Path;

/// What a tree holds: each path, and for a file its bytes (`None` when it
/// cannot be read); directories map to `Some(empty)` under a trailing `/`.
type Tree = BTreeMap<String, Option<Vec<u8>>>;

/// The tree the local source `dir` presents, walked through `Fs`.
fn local(dir: &Path) -> Tree {
    fn walk(fs: &Fs, ino: u64, at: &str, out: &mut Tree) {
        for e in fs.readdir(ino).unwrap() {
            let name = e.name.to_string_lossy();
            if name == "." || name == ".." {
                continue;
            }
            let path = format!("{at}{name}");
            let a = fs.lookup(ino, &e.name).unwrap();
            if a.kind == Kind::Dir {
                out.insert(format!("{path}/"), Some(Vec::new()));
                walk(fs, a.ino, &format!("{path}/"), out);
                continue;
            }
            let bytes = fs
                .open(a.ino, false)
                .ok()
                .and_then(|(fh, _)| fs.read(fh, 0, a.size as u32 + 1).ok());
            out.insert(path, bytes);
        }
    }
    let fs = Fs::new(dir, &FsOptions::default()).unwrap();
    let mut out = Tree::new();
    walk(&fs, ROOT_INO, "", &mut out);
    out
}

/// The tree under the mount point `top`, leaving out `skip`.
fn mounted(top: &Path, skip: &[&str]) -> Tree {
    fn walk(d: &Path, at: &str, skip: &[&str], out: &mut Tree) {
        for e in std::fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if at.is_empty() && skip.contains(&name.as_str()) {
                continue;
            }
            let path = format!("{at}{name}");
            if e.file_type().unwrap().is_dir() {
                out.insert(format!("{path}/"), Some(Vec::new()));
                walk(&e.path(), &format!("{path}/"), skip, out);
            } else {
                out.insert(path, std::fs::read(e.path()).ok());
            }
        }
    }
    let mut out = Tree::new();
    walk(top, "", skip, &mut out);
    out
}

/// The fixture directory `rel`, staged in a new directory (without its
/// `manifest.json`).
fn staged(rel: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let src = fixture(rel);
    let o = std::process::Command::new("cp")
        .arg("-r")
        .arg(src.join("."))
        .arg(d.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_file(d.path().join("manifest.json"));
    d
}

/// The mount of `r` (with options `opts`) shows the tree `want`, leaving
/// out `skip`; every difference is named.
fn check(r: &Remote, want: &Tree, opts: &[&str], skip: &[&str]) {
    let mut m = r.mount(opts);
    let got = mounted(&m.mp(), skip);
    let log = m.log();
    m.unmount();
    let mut bad = Vec::new();
    for (k, v) in want {
        match got.get(k) {
            None => bad.push(format!("{k}: missing")),
            Some(g) if g.is_some() != v.is_some() => bad.push(format!(
                "{k}: readable {} locally, {} remotely",
                v.is_some(),
                g.is_some()
            )),
            Some(g) if g != v => bad.push(format!("{k}: other bytes")),
            Some(_) => {}
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(*k)) {
        bad.push(format!("{k}: only remote"));
    }
    assert!(
        bad.is_empty(),
        "{} of {} entries differ from {}:\n{}\nlog:\n{log}",
        bad.len(),
        want.len(),
        r.base,
        bad.join("\n")
    );
}

/// The staged fixture directories `rels` and the trees they present.
fn local_trees(rels: &[&str]) -> Vec<(tempfile::TempDir, Tree)> {
    rels.iter()
        .map(|rel| {
            let d = staged(rel);
            let t = local(d.path());
            (d, t)
        })
        .collect()
}

/// What the store fixtures must hold for the test to mean anything:
/// stores shown as directories, one member that cannot be read (a
/// deflated zip member).
fn stores_tree() -> (tempfile::TempDir, Tree) {
    let (d, t) = local_trees(&["stores/b2-4.14.1"]).pop().unwrap();
    assert!(t.contains_key("dict.b2z/") && t.contains_key("embed.b2e/"));
    assert!(t.values().any(|v| v.is_none()), "no unreadable member");
    (d, t)
}

/// The Zarr fixtures of zarr-python 2 and 3, each store passed through
/// and each array also a `.npy`.
fn zarr_trees() -> Vec<(tempfile::TempDir, Tree)> {
    let all = local_trees(&["zarr/z2-2.18.7/stores", "zarr/z3-3.1.6/stores"]);
    for (_, t) in &all {
        assert!(t.contains_key("group.zarr/.zgroup") || t.contains_key("group.zarr/zarr.json"));
        assert!(t.keys().filter(|k| k.ends_with(".npy")).count() >= 4);
    }
    all
}

/// Each tree uploaded to moto and mounted.
fn on_s3(trees: &[(tempfile::TempDir, Tree)]) {
    let Some(moto) = Moto::start() else { return };
    moto.mkbucket("trees");
    for (i, (d, want)) in trees.iter().enumerate() {
        let prefix = format!("t{i}");
        moto.upload("trees", &prefix, d.path());
        check(&Remote::s3(&moto, "trees", &prefix), want, &[], &[]);
    }
}

/// Each tree served by the plain-HTTP server, listed by its manifest.
fn on_http(trees: &[(tempfile::TempDir, Tree)]) {
    for (d, want) in trees {
        write_manifest(d.path());
        let Some(srv) = Faulty::start(d.path()) else {
            return;
        };
        check(&Remote::http(&srv), want, &[MANIFEST], &["manifest.txt"]);
    }
}

#[test]
fn s3_stores_are_the_local_tree() {
    on_s3(&[stores_tree()]);
}

#[test]
fn http_stores_are_the_local_tree() {
    on_http(&[stores_tree()]);
}

#[test]
fn s3_zarr_stores_are_the_local_tree() {
    on_s3(&zarr_trees());
}

#[test]
fn http_zarr_stores_are_the_local_tree() {
    on_http(&zarr_trees());
}
