//! Names as the store gives them: every character a key may hold read
//! under its own name, names that cannot be file names left out without
//! failing their directory, an object and a prefix of one name, weak
//! ETags, listings of huge names and listings that break off.

use crate::common::*;
use crate::harness::*;
use crate::servers::*;
use std::collections::BTreeSet;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The container every special name holds (presented as `.npy`).
const FX: &str = "b2nd/array1-2d.b2nd";

/// Stems of object names `STEM.b2nd`: every character object_store's path
/// encoding touched, a space, non-ASCII, and `%XX` sequences that are
/// literal text.
const SPECIAL: &[&str] = &[
    "t~",
    "t[",
    "t]",
    "t#",
    "t%",
    "t?",
    "t*",
    "t|",
    "t{",
    "t}",
    "t\\",
    "t^",
    "t\"",
    "t<",
    "t>",
    "t`",
    "t sp",
    "té",
    "x%41",
    "pct%2Fslash",
    "%2E%2E",
];

/// A plain object named `%2E%2E` (no extension), and what it holds.
const DOTS: (&str, &[u8]) = ("%2E%2E", b"percent-two-e twice\n");

/// `dir/d/STEM.b2nd` for each of `stems`, and the plain `DOTS` object.
fn stage_special(dir: &Path, stems: &[&str]) {
    let d = dir.join("d");
    std::fs::create_dir_all(&d).unwrap();
    for s in stems {
        copy(&fixture(FX), &d.join(format!("{s}.b2nd")));
    }
    std::fs::write(d.join(DOTS.0), DOTS.1).unwrap();
}

/// The name `STEM.b2nd` is presented under.
fn presented(stem: &str) -> String {
    let p = bloscfs::names::presented_name(std::ffi::OsStr::new(&format!("{stem}.b2nd")), true);
    p.to_str().unwrap().to_string()
}

/// The names of a directory of a mount.
fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// Through a mount of `r`: `d/` lists every special name exactly (and
/// nothing else), each reads byte-exact.
fn check_mount(r: &Remote, stems: &[&str]) {
    if !fuse_available() {
        return;
    }
    let want = reference_bytes(FX);
    let mut m = r.mount(&[]);
    let listed = names(&m.path("d"));
    let mut expected: BTreeSet<String> = stems.iter().map(|s| presented(s)).collect();
    expected.insert(DOTS.0.to_string());
    assert_eq!(listed, expected, "{}\n{}", r.base, m.log());
    let mut bad = Vec::new();
    for s in stems {
        match std::fs::read(m.path("d").join(presented(s))) {
            Ok(got) if got == want => {}
            Ok(got) => bad.push(format!("{s}: {}", first_diff(&want, &got))),
            Err(e) => bad.push(format!("{s}: {e}")),
        }
    }
    match std::fs::read(m.path("d").join(DOTS.0)) {
        Ok(got) if got == DOTS.1 => {}
        other => bad.push(format!("{}: {other:?}", DOTS.0)),
    }
    let log = m.log();
    m.unmount();
    assert!(bad.is_empty(), "{}:\n{}\n{log}", r.base, bad.join("\n"));
}

/// `bloscfs cat` of each name, typed into the URL by `typed`.
fn check_cat(r: &Remote, stems: &[&str], typed: impl Fn(&str) -> String) {
    let want = reference_bytes(FX);
    let mut bad = Vec::new();
    for s in stems {
        let o = r.cat(&format!("d/{}", typed(&format!("{s}.b2nd"))), None, &[]);
        if !o.status.success() || o.stdout != want {
            bad.push(format!("{s}: {}", o.stderr.trim()));
        }
    }
    assert!(bad.is_empty(), "{}:\n{}", r.base, bad.join("\n"));
}

/// `s` as a URL path segment (every byte but the unreserved ones as %XX).
fn encoded(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn every_special_character_reads_under_its_own_name_over_s3() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    stage_special(dir.path(), SPECIAL);
    moto.mkbucket("names");
    moto.upload("names", "", dir.path());
    let r = Remote::s3(&moto, "names", "");
    check_mount(&r, SPECIAL);
    // An s3:// URL takes the key as typed; `?` and `#` cannot be in one.
    let typable: Vec<&str> = SPECIAL
        .iter()
        .copied()
        .filter(|s| !s.contains(['?', '#']))
        .collect();
    check_cat(&r, &typable, str::to_string);
}

#[test]
fn every_special_character_reads_under_its_own_name_over_http() {
    let dir = tempfile::tempdir().unwrap();
    stage_special(dir.path(), SPECIAL);
    let Some(f) = Faulty::start(dir.path()) else {
        return;
    };
    // By the S3-style listing, then by a manifest.
    let r = Remote::http(&f);
    check_mount(&r, SPECIAL);
    check_cat(&r, SPECIAL, encoded);
    write_manifest(dir.path());
    check_mount(&r.with(MANIFEST), SPECIAL);
}

#[test]
fn special_characters_read_over_caterva2() {
    let dir = tempfile::tempdir().unwrap();
    // The names a Caterva2 server stores and serves (it refuses `?`, `#`,
    // `%`, `\` and `"` in paths of its own).
    let stems: Vec<&str> = SPECIAL
        .iter()
        .copied()
        .filter(|s| !s.contains(['?', '#', '%', '\\', '"']))
        .collect();
    stage_special(dir.path(), &stems);
    std::fs::remove_file(dir.path().join("d").join(DOTS.0)).unwrap();
    let Some(c) = Caterva2::start(dir.path()) else {
        return;
    };
    let r = Remote::caterva2(&c);
    let want = reference_bytes(FX);
    if fuse_available() {
        let mut m = r.mount(&[]);
        let listed = names(&m.path("d"));
        let expected: BTreeSet<String> = stems.iter().map(|s| presented(s)).collect();
        assert_eq!(listed, expected, "{}", m.log());
        for s in &stems {
            let got = std::fs::read(m.path("d").join(presented(s))).unwrap();
            assert!(got == want, "{s}: {}", first_diff(&want, &got));
        }
        m.unmount();
    }
}

/// A moto server (with FUSE) whose `bucket` holds `FX` at `key` (`DIR/NAME`).
fn bucket_with(bucket: &str, key: &str) -> Option<(Moto, tempfile::TempDir)> {
    let moto = Moto::start()?;
    if !fuse_available() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join(key);
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    copy(&fixture(FX), &at);
    moto.mkbucket(bucket);
    moto.upload(bucket, "", dir.path());
    Some((moto, dir))
}

/// Keys no file can be named by, in the directory of good ones and at
/// the root: the good entries list and read, the bucket root mounts.
#[test]
fn keys_that_cannot_be_file_names_are_left_out() {
    let Some((moto, _dir)) = bucket_with("bad", "d/good.b2nd") else {
        return;
    };
    let f = fixture(FX);
    let long = format!("d/{}.b2nd", "n".repeat(1100));
    for key in [
        "d//b.b2nd",
        "d/./b.b2nd",
        "d/../b.b2nd",
        "/lead.b2nd",
        "\\x01ctl.b2nd",
        "d/\\x01ctl.b2nd",
        "d/nul\\x00.b2nd",
        long.as_str(),
    ] {
        moto.putx("bad", key, &f);
    }
    let r = Remote::s3(&moto, "bad", "");
    let mut m = r.mount(&[]);
    let root = names(&m.mp());
    assert!(root.contains("d"), "{root:?}\n{}", m.log());
    let d = names(&m.path("d"));
    assert!(d.contains("good.npy"), "{d:?}\n{}", m.log());
    assert!(d.iter().all(|n| n.len() <= 255 && !n.is_empty()), "{d:?}");
    let want = reference_bytes(FX);
    assert!(std::fs::read(m.path("d/good.npy")).unwrap() == want);
    let ctl = m.path("d/\u{1}ctl.npy");
    assert!(std::fs::read(ctl).unwrap() == want);
    let log = m.log();
    m.unmount();
    assert!(log.contains("left out"), "{log}");
}

/// An object `k` and objects under `k/`: `k` is the directory, and what
/// is in it reads.
#[test]
fn a_prefix_wins_over_an_object_of_its_name() {
    let Some((moto, _dir)) = bucket_with("both", "k/inner.b2nd") else {
        return;
    };
    moto.put("both", "k", &fixture(FX));
    let mut m = Remote::s3(&moto, "both", "").mount(&[]);
    let root: Vec<_> = std::fs::read_dir(m.mp())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(root, vec!["k"], "{}", m.log());
    assert!(m.path("k").is_dir());
    let got = std::fs::read(m.path("k/inner.npy")).unwrap();
    assert!(got == reference_bytes(FX));
    m.unmount();
}

/// A plain file of `n` bytes whose content depends on `seed`.
fn plain(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| ((i as u64 * 2_654_435_761) >> 13) as u8 ^ seed)
        .collect()
}

/// A server with weak ETags that compares If-Match strongly (nginx):
/// reads succeed; the object replaced between two reads fails the second
/// read, never mixing versions.
#[test]
fn weak_etags_read_and_a_replacement_is_caught() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let n = 4 << 20;
    std::fs::write(dir.path().join("w.bin"), plain(n, 0)).unwrap();
    std::fs::write(dir.path().join("r.bin"), plain(n, 1)).unwrap();
    let Some(f) = Faulty::start(dir.path()) else {
        return;
    };
    f.set_fault("weak-etag");
    let mut m = Remote::http(&f).mount(&[]);
    let got = std::fs::read(m.path("w.bin")).unwrap();
    assert!(got == plain(n, 0), "{}", first_diff(&plain(n, 0), &got));

    // Another object, read at its start only, then replaced: same
    // length, another mtime (so another ETag and Last-Modified).
    let file = std::fs::File::open(m.path("r.bin")).unwrap();
    let mut buf = vec![0u8; 4096];
    file.read_exact_at(&mut buf, 0).unwrap();
    assert!(buf == plain(n, 1)[..4096]);
    let t = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    let new = dir.path().join("r.new");
    std::fs::write(&new, plain(n, 0xff)).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&new)
        .unwrap()
        .set_modified(t)
        .unwrap();
    std::fs::rename(&new, dir.path().join("r.bin")).unwrap();
    let at = (3 << 20) + 12_345;
    file.read_exact_at(&mut buf, at)
        .expect_err("a read of the replaced object succeeded");
    drop(file);
    m.unmount();
}

/// Listing pages of 4 objects named by 1 MiB each, 30 of them: the names
/// are left out as they come, so the daemon holds about one page, not
/// 120 MiB of names; the real entries after them list.
#[test]
fn pages_of_huge_names_cost_one_page() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/real.txt"), b"real\n").unwrap();
    let Some(f) = Faulty::start(dir.path()) else {
        return;
    };
    // metadata_ttl=0: a listing is trusted only four times as long as it
    // took, so `sub` is soon listed again, under the fault.
    let mut m = Remote::http(&f).mount(&["metadata_ttl=0"]);
    assert!(names(&m.mp()).contains("sub"));
    let before = peak_rss(m.pid());
    f.set_fault("long-names:30");
    let mut listed = names(&m.path("sub"));
    for _ in 0..1000 {
        if f.faulted("long-names") >= 30 {
            break;
        }
        listed = names(&m.path("sub"));
    }
    assert!(f.faulted("long-names") >= 30, "{}", f.stats());
    f.set_fault("none");
    assert_eq!(listed, BTreeSet::from(["real.txt".to_string()]));
    let grown = peak_rss(m.pid()).saturating_sub(before);
    eprintln!(
        "30 pages of 1 MiB names: the daemon grew by {} KiB",
        grown >> 10
    );
    assert!(grown < 48 << 20, "the daemon grew by {} MiB", grown >> 20);
    let log = m.log();
    m.unmount();
    assert!(log.contains("left out"), "{log}");
}

/// A listing whose second page fails (the store died): the directory
/// fails to list, never shows the first page's entries as all there is.
#[test]
fn a_listing_whose_second_page_fails_fails() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/x.txt"), b"x\n").unwrap();
    let Some(f) = Faulty::start(dir.path()) else {
        return;
    };
    let mut m = Remote::http(&f).mount(&["retries=1"]);
    f.set_fault("broken-pages");
    let ls = std::process::Command::new("ls")
        .arg(m.path("sub"))
        .output()
        .unwrap();
    f.set_fault("none");
    assert!(f.faulted("broken-pages") >= 2, "{}", f.stats());
    assert!(
        !ls.status.success(),
        "ls of a listing that broke off: {}",
        String::from_utf8_lossy(&ls.stdout)
    );
    m.unmount();
}
