//! A Zarr array's attributes (`.zattrs`, v3 `attributes`) as `user.zarr.*`
//! extended attributes of its `.npy`: one per top-level key, the value its
//! compact JSON text; from consolidated metadata when the array's group
//! has some; none, and still the `.npy`, when the document is bad.
//! Fixtures: zarr-python 2.18 and 3.1 (scripts/fixtures/gen_zarr.py).

use crate::common;
use crate::zarr::lookup;
use bloscfs::fs::{Fs, FsOptions};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The `user.zarr.*` attributes of the file at `rel`: (name, value) from
/// `listxattr` and `getxattr`.
fn zarr_xattrs(fs: &Fs, rel: &str) -> Vec<(String, String)> {
    let ino = lookup(fs, rel).ino;
    let list = fs.listxattr(ino).unwrap();
    let names = list
        .split(|&b| b == 0)
        .filter(|n| n.starts_with(b"user.zarr."));
    names
        .map(|n| {
            let v = fs.getxattr(ino, OsStr::from_bytes(n)).unwrap();
            let n = String::from_utf8(n.to_vec()).unwrap();
            (n, String::from_utf8(v).unwrap())
        })
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// What gen_zarr.py's `ATTRS` are as extended attributes.
fn fixture_attrs() -> Vec<(String, String)> {
    pairs(&[
        ("user.zarr.note", r#"{"by":"gen_zarr","ok":true}"#),
        ("user.zarr.scale", "[1,2.5]"),
        ("user.zarr.units", r#""m""#),
    ])
}

#[test]
fn v2_and_v3_attributes_are_user_zarr_xattrs_of_the_npy() {
    for (w, store) in [("z2-2.18.7", "lz4"), ("z3-3.1.6", "zstd")] {
        let dir = common::fixture(&format!("zarr/{w}/stores"));
        let fs = Fs::new(&dir, &FsOptions::default()).unwrap();
        assert_eq!(zarr_xattrs(&fs, &format!("{store}.npy")), fixture_attrs());
        let missing = fs.getxattr(
            lookup(&fs, &format!("{store}.npy")).ino,
            OsStr::new("user.zarr.x"),
        );
        assert_eq!(missing.unwrap_err().errno(), libc::ENODATA, "{w}");
        // The store's own files have none.
        let zarr = format!("{store}.zarr");
        let own = fs.listxattr(lookup(&fs, &zarr).ino).unwrap();
        assert!(own.is_empty(), "{w}: {own:?}");
    }
}

#[test]
fn an_array_without_attributes_has_no_user_zarr_xattrs() {
    let dir = common::fixture("zarr/z3-3.1.6/stores");
    let fs = Fs::new(&dir, &FsOptions::default()).unwrap();
    assert_eq!(zarr_xattrs(&fs, "blosc.npy"), []);
    let dir = common::fixture("zarr/z2-2.18.7/stores");
    let fs = Fs::new(&dir, &FsOptions::default()).unwrap();
    assert_eq!(zarr_xattrs(&fs, "nested.npy"), []);
}

/// Each writer's consolidated group, its array with attributes, and where
/// the array's own copy of them is.
const CONSOLIDATED: [(&str, &str, &str); 2] = [
    ("z2-2.18.7", "a", "a/.zattrs"),
    ("z3-3.1.6", "x", "x/zarr.json"),
];

#[test]
fn consolidated_groups_give_their_arrays_attributes() {
    for (w, array, own) in CONSOLIDATED {
        let tmp = tempfile::tempdir().unwrap();
        let from = common::fixture(&format!("zarr/{w}/stores/group.zarr"));
        common::copy(&from, &tmp.path().join("group.zarr"));
        // The array's own copy says otherwise: the consolidated one is used.
        let own = tmp.path().join("group.zarr").join(own);
        let text = std::fs::read_to_string(&own).unwrap();
        std::fs::write(&own, text.replace("counts", "other")).unwrap();
        let fs = Fs::new(tmp.path(), &FsOptions::default()).unwrap();
        let got = zarr_xattrs(&fs, &format!("group.zarr/{array}.npy"));
        assert_eq!(got, pairs(&[("user.zarr.long_name", r#""counts""#)]), "{w}");
    }
}

/// A copy of writer `w`'s store `store` whose attributes are `attrs` (the
/// `.zattrs` of v2, the `attributes` of v3's `zarr.json`, raw JSON text).
fn with_attrs(tmp: &Path, w: &str, store: &str, attrs: &str) {
    let to = tmp.join(store);
    common::copy(&common::fixture(&format!("zarr/{w}/stores/{store}")), &to);
    if w.starts_with("z2") {
        std::fs::write(to.join(".zattrs"), attrs).unwrap();
    } else {
        let text = std::fs::read_to_string(to.join("zarr.json")).unwrap();
        let start = text.find("\"attributes\"").unwrap();
        let end = start + text[start..].find("\n  },").unwrap() + 4;
        let text = format!("{}\"attributes\": {attrs}{}", &text[..start], &text[end..]);
        std::fs::write(to.join("zarr.json"), text).unwrap();
    }
}

#[test]
fn bad_attributes_give_none_and_the_npy_still_reads() {
    // Not JSON (v2); JSON, but attributes that are not an object (v3).
    let cases = [
        ("z2-2.18.7", "lz4", "{\"units\": "),
        ("z3-3.1.6", "zstd", "[1, 2]"),
    ];
    for (w, name, attrs) in cases {
        let tmp = tempfile::tempdir().unwrap();
        with_attrs(tmp.path(), w, &format!("{name}.zarr"), attrs);
        let fs = Fs::new(tmp.path(), &FsOptions::default()).unwrap();
        let npy = format!("{name}.npy");
        assert_eq!(zarr_xattrs(&fs, &npy), [], "{w}");
        let want = common::fixture(&format!("zarr/{w}/expected/{name}.zarr.npy"));
        let want = common::as_bloscfs_shows(&std::fs::read(want).unwrap());
        assert_eq!(lookup(&fs, &npy).size, want.len() as u64, "{w}");
    }
}

#[test]
fn values_past_the_xattr_size_are_left_out_and_the_others_shown() {
    let tmp = tempfile::tempdir().unwrap();
    let big = "x".repeat(70_000);
    let doc = format!("{{\"big\": \"{big}\", \"small\": 1}}");
    with_attrs(tmp.path(), "z2-2.18.7", "lz4.zarr", &doc);
    let fs = Fs::new(tmp.path(), &FsOptions::default()).unwrap();
    assert_eq!(
        zarr_xattrs(&fs, "lz4.npy"),
        pairs(&[("user.zarr.small", "1")])
    );
}

#[test]
fn an_attributes_document_past_its_cap_gives_none() {
    let tmp = tempfile::tempdir().unwrap();
    let filler: String = (0..100_000).map(|i| format!("\"k{i}\": {i}, ")).collect();
    let doc = format!("{{{filler}\"last\": 0}}");
    assert!(doc.len() as u64 > bloscfs_zarr::attrs::MAX_DOC_BYTES);
    with_attrs(tmp.path(), "z2-2.18.7", "lz4.zarr", &doc);
    let fs = Fs::new(tmp.path(), &FsOptions::default()).unwrap();
    assert_eq!(zarr_xattrs(&fs, "lz4.npy"), []);
}
