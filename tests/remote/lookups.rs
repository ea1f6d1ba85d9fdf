//! What a lookup costs on a remote tree: a name is resolved from one
//! listing of its directory, whatever candidate source names it has
//! (`x.npy` may be `x.b2nd`, `x.b2frame`, `x`, ...), never one request per
//! candidate.

use crate::common::*;
use crate::harness::*;
use crate::servers::*;
use std::collections::HashMap;
use std::process::Command;

/// The mount's `user.bloscfs.stats`, as numbers.
pub fn stats(m: &RemoteMount) -> HashMap<String, u64> {
    let out = Command::new("getfattr")
        .args([
            "-n",
            "user.bloscfs.stats",
            "--only-values",
            "--absolute-names",
        ])
        .arg(m.mp())
        .output()
        .unwrap();
    assert!(out.status.success(), "getfattr failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap_or(0)))
        .collect()
}

#[test]
fn opening_a_file_of_an_unlisted_directory_costs_one_listing() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    copy(&fixture("b2nd/array1-2d.b2nd"), &sub.join("x.b2nd"));
    for i in 0..20 {
        std::fs::write(sub.join(format!("other{i}.txt")), b"plain").unwrap();
    }
    moto.mkbucket("lookups");
    moto.upload("lookups", "p", dir.path());
    let r = Remote::s3(&moto, "lookups", "p");
    let mut m = r.mount(&["xattr", "metadata_ttl=60"]);
    let before = stats(&m);
    let got = std::fs::read(m.path("sub/x.npy")).unwrap();
    let want = reference_bytes("b2nd/array1-2d.b2nd");
    assert!(got == want, "{}", first_diff(&want, &got));
    let after = stats(&m);
    let d = |k: &str| after[k] - before[k];
    // The listing of sub/ (and of the root if it was not kept), and the
    // object's head and tail.
    assert!(
        d("remote_lists") <= 2 && d("remote_gets") <= 2,
        "lookup, open and read: {} listings, {} GETs",
        d("remote_lists"),
        d("remote_gets")
    );
    // Another name in the same directory: nothing more to list.
    assert!(std::fs::metadata(m.path("sub/missing.npy")).is_err());
    let again = stats(&m);
    assert_eq!(again["remote_lists"], after["remote_lists"]);
    assert_eq!(again["remote_gets"], after["remote_gets"]);
    m.unmount();
}

/// An object replaced after it was looked up, while its listing is still
/// trusted: the open that finds it changed has the kernel look the name up
/// again (ESTALE), and reads the new version at once, not after
/// `metadata_ttl`. (A file already open keeps serving the version it was
/// opened at.)
#[test]
fn an_open_right_after_a_replacement_reads_the_new_version() {
    let Some(moto) = Moto::start() else { return };
    let data = tempfile::tempdir().unwrap();
    if big_frames(data.path()).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    copy(
        &data.path().join("big.b2frame"),
        &dir.path().join("x.b2frame"),
    );
    moto.mkbucket("replace");
    moto.upload("replace", "p", dir.path());
    let r = Remote::s3(&moto, "replace", "p");
    let mut m = r.mount(&["metadata_ttl=600"]);
    // Looked up and probed (its head fetched), not opened.
    let old = std::fs::read(data.path().join("big.raw")).unwrap();
    assert_eq!(
        std::fs::metadata(m.path("x")).unwrap().len(),
        old.len() as u64
    );
    moto.put("replace", "p/x.b2frame", &data.path().join("big2.b2frame"));
    let got = std::fs::read(m.path("x")).unwrap();
    let want = std::fs::read(data.path().join("big2.raw")).unwrap();
    assert!(
        got == want,
        "{} bytes read: {}\n{}",
        got.len(),
        first_diff(&want, &got),
        m.log()
    );
    m.unmount();
}

/// `ls -l` of a directory whose listing expires while its entries are
/// probed (many threads at once): the directory is listed again once per
/// `metadata_ttl`, not once per probing thread.
#[test]
fn a_listing_that_expires_while_probed_is_fetched_once() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let chunk = std::fs::read(fixture("chunk2/lz4-shuffle-ts2-never_split-series.b2")).unwrap();
    for i in 0..300 {
        std::fs::write(dir.path().join(format!("c{i:04}")), &chunk).unwrap();
    }
    moto.mkbucket("herd");
    moto.upload("herd", "p", dir.path());
    let r = Remote::s3(&moto, "herd", "p");
    let mut m = r.mount(&["xattr", "metadata_ttl=0.2"]);
    let before = stats(&m)["remote_lists"];
    let t = std::time::Instant::now();
    let lens: Vec<u64> = std::fs::read_dir(m.mp())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .collect();
    let want = reference_bytes("chunk2/lz4-shuffle-ts2-never_split-series.b2").len() as u64;
    let n = lens.iter().filter(|&&len| len == want).count();
    let periods = (t.elapsed().as_secs_f64() / 0.2).ceil() as u64;
    assert_eq!(
        n, 300,
        "containers listed with their decoded size: {lens:?}"
    );
    let lists = stats(&m)["remote_lists"] - before;
    assert!(
        lists <= periods + 2,
        "{lists} listings in {periods} periods of metadata_ttl"
    );
    m.unmount();
}

/// A directory of more than a listing page (6,000 objects, 6 pages): a
/// lookup asks for its first page and then only for the names sharing the
/// looked-up name's start (`m` for `m.npy`: every source name it may
/// have), not for every page; a later lookup in it, for its names alone.
/// Names follow the rules of a whole listing (two containers wanting one
/// name both keep theirs), and `ls` still lists every entry.
#[test]
fn a_lookup_in_a_large_directory_lists_only_the_names_it_needs() {
    if !fuse_available() {
        return;
    }
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    std::fs::create_dir(&big).unwrap();
    for i in 0..6000 {
        std::fs::write(big.join(format!("f{i:05}")), b"plain").unwrap();
    }
    let frame = "frame/blocks-lz4.b2frame";
    copy(&fixture("b2nd/array1-2d.b2nd"), &big.join("m.b2nd"));
    copy(&fixture(frame), &big.join("t.b2frame"));
    copy(&fixture(frame), &big.join("y.b2"));
    copy(&fixture(frame), &big.join("y.b2frame"));
    moto.mkbucket("large");
    moto.upload("large", "p", dir.path());
    let r = Remote::s3(&moto, "large", "p");
    let mut m = r.mount(&["xattr", "metadata_ttl=60"]);
    let lists = |m: &RemoteMount| stats(m)["remote_lists"];

    let before = lists(&m);
    let got = std::fs::read(m.path("big/m.npy")).unwrap();
    assert!(got == reference_bytes("b2nd/array1-2d.b2nd"));
    // The root's listing, big/'s first page, then big/chunks* (is big/ a
    // sparse frame?) and big/m*; listing big/ whole would take 6.
    assert!(
        lists(&m) - before <= 4,
        "a lookup in a 6-page directory: {} listings",
        lists(&m) - before
    );
    let before = lists(&m);
    let got = std::fs::read(m.path("big/t")).unwrap();
    assert!(got == reference_bytes(frame));
    assert!(std::fs::metadata(m.path("big/f01234")).unwrap().is_file());
    assert!(
        std::fs::metadata(m.path("big/y")).is_err(),
        "two containers want `y`"
    );
    assert!(std::fs::metadata(m.path("big/y.b2")).is_ok());
    assert!(std::fs::metadata(m.path("big/missing")).is_err());
    assert!(
        lists(&m) - before <= 5,
        "five lookups in a known big directory: {} listings",
        lists(&m) - before
    );
    let names = std::fs::read_dir(m.path("big")).unwrap().count();
    assert_eq!(names, 6004);
    m.unmount();
}
