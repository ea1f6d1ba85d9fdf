//! A Zarr group with consolidated metadata costs no listing of its array
//! directories: `ls` of the group, `stat` and a whole read of each array's
//! `.npy` and its `user.zarr.*` attributes list only the directories
//! listed by hand. Counted by the server (the fault server's S3-style
//! listings, each request recorded) and, on moto, by the client's
//! `remote_lists`. Fixtures: the consolidated groups of zarr-python 2.18
//! and 3.1 (gen_zarr.py).

use crate::common::*;
use crate::harness::*;
use crate::servers::*;
use std::path::Path;
use std::process::Command;

/// (the `.npy`, its writer, the array's path in the writer's stores).
const ARRAYS: [(&str, &str, &str); 4] = [
    ("v2/group.zarr/a.npy", "z2-2.18.7", "group.zarr/a"),
    ("v2/group.zarr/sub/b.npy", "z2-2.18.7", "group.zarr/sub/b"),
    ("v3/group.zarr/x.npy", "z3-3.1.6", "group.zarr/x"),
    ("v3/group.zarr/sub/y.npy", "z3-3.1.6", "group.zarr/sub/y"),
];

/// Every array directory of the two groups.
const ARRAY_DIRS: [&str; 6] = [
    "v2/group.zarr/a/",
    "v2/group.zarr/sub/b/",
    "v2/group.zarr/sub/c/",
    "v3/group.zarr/x/",
    "v3/group.zarr/sub/y/",
    "v3/group.zarr/sub/z/",
];

/// The directories [`present`] lists (the mount's root and those above
/// and holding the `.npy` files).
const LISTED: usize = 7;

fn groups() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (to, w) in [("v2", "z2-2.18.7"), ("v3", "z3-3.1.6")] {
        let from = fixture(&format!("zarr/{w}/stores/group.zarr"));
        copy(&from, &d.path().join(to).join("group.zarr"));
    }
    d
}

/// `ls` of each group directory, `stat`, a whole read and the attributes
/// of each array's `.npy`, checked against what zarr-python reads.
fn present(m: &RemoteMount) {
    for (npy, w, rel) in ARRAYS {
        let path = m.path(npy);
        let parent = path.parent().unwrap();
        let name = path.file_name().unwrap();
        let listed: Vec<_> = std::fs::read_dir(parent)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(listed.iter().any(|n| n == name), "{npy}: {listed:?}");
        let want = std::fs::read(fixture(&format!("zarr/{w}/expected/{rel}.npy"))).unwrap();
        let want = as_bloscfs_shows(&want);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), want.len() as u64);
        assert!(std::fs::read(&path).unwrap() == want, "{npy}");
        let attrs = getfattr(&path, "-d");
        if npy.ends_with("/a.npy") || npy.ends_with("/x.npy") {
            assert!(attrs.contains("user.zarr.long_name"), "{npy}: {attrs}");
        }
    }
}

fn getfattr(path: &Path, how: &str) -> String {
    let o = Command::new("getfattr")
        .args([how, "--absolute-names"])
        .arg(path)
        .output()
        .unwrap();
    assert!(o.status.success(), "getfattr {}", path.display());
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn http_consolidated_groups_list_no_array_directory() {
    let d = groups();
    let Some(srv) = Faulty::start_recording(d.path()) else {
        return;
    };
    let mut m = Remote::http(&srv).mount(&["xattr"]);
    present(&m);
    m.unmount();
    let lists: Vec<String> = srv
        .received()
        .iter()
        .filter_map(|r| r["path"].as_str())
        .filter(|p| p.contains("list-type=2"))
        .map(|p| p.replace("%2F", "/"))
        .collect();
    for dir in ARRAY_DIRS {
        let group = dir.split_once("group.zarr/").unwrap().1;
        let named = |p: &&String| p.contains(dir) || p.contains(&format!("prefix={group}"));
        let hit: Vec<_> = lists.iter().filter(named).collect();
        assert!(hit.is_empty(), "{dir} listed: {hit:?} of {lists:#?}");
    }
    assert!(
        lists.len() <= LISTED,
        "{} listings: {lists:#?}",
        lists.len()
    );
}

#[test]
fn s3_consolidated_groups_list_no_array_directory() {
    let Some(moto) = Moto::start() else { return };
    let d = groups();
    moto.mkbucket("zarrcounts");
    moto.upload("zarrcounts", "p", d.path());
    let mut m = Remote::s3(&moto, "zarrcounts", "p").mount(&["xattr"]);
    present(&m);
    let lists = crate::lookups::stats(&m)["remote_lists"] as usize;
    assert!(lists <= LISTED, "{lists} listings for {LISTED} directories");
    m.unmount();
}

/// From a server whose ETags are weak (the pages of such an object are not
/// shared between opens), a chunk of an array a consolidated group
/// presents is still fetched once: the GET that finds it by its key brings
/// what its open reads first, kept for that open. (Each chunk was fetched
/// twice, by the lookup and again by the open.)
#[test]
fn http_weak_etags_fetch_each_chunk_once() {
    let d = groups();
    let Some(srv) = Faulty::start_recording(d.path()) else {
        return;
    };
    srv.set_fault("weak-etag");
    let mut m = Remote::http(&srv).mount(&["xattr"]);
    present(&m);
    m.unmount();
    let mut gets: std::collections::BTreeMap<String, usize> = Default::default();
    for r in srv.received() {
        let (Some("GET"), Some(p)) = (r["method"].as_str(), r["path"].as_str()) else {
            continue;
        };
        let key = p.split('?').next().unwrap_or(p);
        let chunk = key.rsplit('/').next().unwrap_or("");
        if chunk.starts_with(|c: char| c.is_ascii_digit()) || key.contains("/c/") {
            *gets.entry(key.to_string()).or_default() += 1;
        }
    }
    assert!(gets.len() >= 8, "chunk GETs seen: {gets:?}");
    let twice: Vec<_> = gets.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "fetched more than once: {twice:?}");
}
