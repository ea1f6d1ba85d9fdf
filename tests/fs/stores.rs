//! python-blosc2's containers by suffix and its stores
//! (scripts/fixtures/gen_store_fixtures.py, fixtures in
//! tests/fixtures/stores): a BatchArray loses `.b2b` like every container;
//! a metalayer and a vlmetalayer of one name are two attributes, each
//! holding its own value.

use crate::common;
use bloscfs::fs::{Fs, FsOptions, ROOT_INO};
use std::ffi::OsStr;
use std::path::PathBuf;

/// Every writer's fixture directory.
fn writers() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(common::fixture("stores"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("manifest.json").is_file())
        .collect();
    out.sort();
    assert!(!out.is_empty());
    out
}

fn manifest(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

/// The presented tree of a writer's fixtures.
fn fs_of(dir: &std::path::Path) -> Fs {
    Fs::new(dir, &FsOptions::default()).unwrap()
}

/// The inode presented at `rel` (`/`-separated).
fn lookup(fs: &Fs, rel: &str) -> bloscfs::fs::Attr {
    let mut ino = ROOT_INO;
    let mut attr = None;
    for part in rel.split('/') {
        let a = fs
            .lookup(ino, OsStr::new(part))
            .unwrap_or_else(|e| panic!("{rel}: {part}: errno {e}"));
        ino = a.ino;
        attr = Some(a);
    }
    attr.unwrap()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn batch_array_loses_its_suffix() {
    for dir in writers() {
        let fs = fs_of(&dir);
        let names = common::names(&fs, ROOT_INO);
        assert!(names.contains(&"batch".to_string()), "{names:?}");
        assert!(!names.contains(&"batch.b2b".to_string()), "{names:?}");
    }
}

#[test]
fn metalayer_and_vlmetalayer_of_one_name_are_both_read() {
    for dir in writers() {
        let fs = fs_of(&dir);
        let want = manifest(&dir)["xattrs"].as_object().unwrap().clone();
        for (file, attrs) in want {
            let ino = lookup(&fs, &file).ino;
            let list = fs.listxattr(ino).unwrap();
            let names: Vec<&[u8]> = list.split(|&b| b == 0).filter(|n| !n.is_empty()).collect();
            let mut unique = names.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), names.len(), "{file}: duplicate names");
            for (name, value) in attrs.as_object().unwrap() {
                assert!(
                    names.contains(&name.as_bytes()),
                    "{file}: {name} not listed"
                );
                let got = fs.getxattr(ino, OsStr::new(name)).unwrap();
                assert_eq!(hex(&got), value.as_str().unwrap(), "{file}: {name}");
            }
        }
    }
}
