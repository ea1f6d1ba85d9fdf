//! Object-store behaviour on moto (and a Caterva2 login): an object
//! replaced while mounted, anonymous access to a public bucket, a listing
//! of 1,000 containers, credentials for Caterva2.

use crate::common::*;
use crate::harness::*;
use crate::servers::*;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// The fixture `rel` copied to `dir/rel`.
fn place(dir: &std::path::Path, rel: &str) {
    std::fs::create_dir_all(dir.join(rel).parent().unwrap()).unwrap();
    copy(&fixture(rel), &dir.join(rel));
}

/// A mounted object replaced (same name, same length, other bytes) by
/// `replace`: reads through a handle opened before either serve the old
/// version's bytes (blocks already fetched) or fail, and the block at chunk
/// 6, never fetched before, fails; a new open past metadata_ttl (1 s, how
/// long a listing answers stats) serves the new version whole.
fn replaced_while_mounted(mut m: RemoteMount, dir: &Path, replace: impl FnOnce()) {
    let v1 = std::fs::read(dir.join("big.raw")).unwrap();
    let v2 = std::fs::read(dir.join("big2.raw")).unwrap();
    let f = std::fs::File::open(m.path("x")).unwrap();
    let mut buf = vec![0u8; 4096];
    let at = |c: usize| c * (2 << 20) + 300_000;
    f.read_exact_at(&mut buf, at(0) as u64).unwrap();
    assert!(buf[..] == v1[at(0)..at(0) + 4096]);
    replace();
    for c in [5, 2] {
        match f.read_exact_at(&mut buf, at(c) as u64) {
            Ok(()) => assert!(
                buf[..] == v1[at(c)..at(c) + 4096],
                "chunk {c} of the old handle served other bytes than the old version's"
            ),
            Err(e) => assert!(
                matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::ESTALE)),
                "{e}"
            ),
        }
    }
    assert!(
        f.read_exact_at(&mut buf, at(6) as u64).is_err(),
        "a block of the replaced object was read through the old handle"
    );
    drop(f);
    std::thread::sleep(Duration::from_millis(1500));
    let got =
        std::fs::read(m.path("x")).unwrap_or_else(|e| panic!("a new open: {e}\nlog:\n{}", m.log()));
    assert!(got == v2, "a new open: {}", first_diff(&v2, &got));
    m.unmount();
}

/// S3: another object uploaded under the same key.
#[test]
fn an_object_replaced_while_mounted_fails_old_handles_and_new_opens_see_it() {
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    if big_frames(d.path()).is_none() {
        return;
    }
    let Some(moto) = Moto::start() else { return };
    moto.mkbucket("replaced");
    moto.put("replaced", "r/x.b2frame", &d.path().join("big.b2frame"));
    let m = Remote::s3(&moto, "replaced", "r")
        .with("timeout=2")
        .mount(&[]);
    replaced_while_mounted(m, d.path(), || {
        moto.put("replaced", "r/x.b2frame", &d.path().join("big2.b2frame"))
    });
}

/// Caterva2 (which ignores If-Match: the ETag of each answer must be
/// checked): the dataset's file rewritten on the server.
#[test]
fn a_caterva2_dataset_replaced_while_mounted_fails_old_handles() {
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    if big_frames(d.path()).is_none() {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    copy(&d.path().join("big.b2frame"), &top.path().join("x.b2frame"));
    let Some(c2) = Caterva2::start(top.path()) else {
        return;
    };
    let m = Remote::caterva2(&c2).with("timeout=2").mount(&[]);
    replaced_while_mounted(m, d.path(), || {
        let tmp = c2.public().join(".x.tmp");
        copy(&d.path().join("big2.b2frame"), &tmp);
        std::fs::rename(&tmp, c2.public().join("x.b2frame")).unwrap();
    });
}

/// A public-read bucket: `-o anonymous` reads it with no credentials at
/// all in the environment (and is refused, clearly, before the bucket was
/// made public: the requests are really unsigned).
#[test]
fn a_public_bucket_reads_anonymously() {
    let Some(moto) = Moto::start() else { return };
    let d = tempfile::tempdir().unwrap();
    let rel = "frame/blocks-lz4.b2frame";
    place(d.path(), rel);
    place(d.path(), "b2nd/array1-2d.b2nd");
    moto.mkbucket("open-data");
    moto.upload("open-data", "", d.path());
    let mut r = Remote::s3(&moto, "open-data", "").with("anonymous");
    r.env = [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
    ]
    .iter()
    .map(|k| (k.to_string(), None))
    .chain([
        (
            "AWS_CONFIG_FILE".to_string(),
            Some("/nonexistent".to_string()),
        ),
        (
            "AWS_SHARED_CREDENTIALS_FILE".to_string(),
            Some("/nonexistent".to_string()),
        ),
    ])
    .collect();
    let o = r.cat(rel, None, &[]);
    assert!(
        !o.status.success() && o.stderr.contains("blocks-lz4.b2frame") && o.stdout.is_empty(),
        "an unsigned read of a private bucket: {}",
        o.stderr
    );
    moto.make_public("open-data");
    let o = r.cat(rel, None, &[]);
    assert!(o.status.success(), "{}", o.stderr);
    assert!(o.stdout == reference_bytes(rel));
    let o = r.cat("b2nd/array1-2d.b2nd", Some((100, 5000)), &[]);
    assert!(o.status.success(), "{}", o.stderr);
    assert!(o.stdout == reference_bytes("b2nd/array1-2d.b2nd")[100..5100]);
    if fuse_available() {
        let mut m = r.mount(&[]);
        let got = std::fs::read(m.path("b2nd/array1-2d.npy")).unwrap();
        assert!(got == reference_bytes("b2nd/array1-2d.b2nd"));
        m.unmount();
    }
}

/// `ls -l` of a prefix of 1,000 small containers finishes (bounded) and
/// shows every presented size right.
#[test]
fn ls_l_of_a_thousand_containers_shows_every_size() {
    if !fuse_available() {
        return;
    }
    let Some(moto) = Moto::start() else { return };
    let small: Vec<String> = matrix()
        .into_iter()
        .filter(|f| f.kind.ends_with("chunk") && !f.npy)
        .map(|f| f.rel)
        .collect();
    assert!(small.len() > 20);
    let d = tempfile::tempdir().unwrap();
    let mut want = std::collections::BTreeMap::new();
    for i in 0..1000 {
        let rel = &small[i % small.len()];
        let ext = rel.rsplit_once('.').unwrap().1;
        copy(&fixture(rel), &d.path().join(format!("c{i:04}.{ext}")));
        want.insert(format!("c{i:04}"), reference_bytes(rel).len() as u64);
    }
    moto.mkbucket("many");
    moto.upload("many", "k", d.path());
    let r = Remote::s3(&moto, "many", "k");
    let mut m = r.mount(&[]);
    let t = Instant::now();
    let o = std::process::Command::new("ls")
        .args(["-l", "--time-style=+"])
        .arg(m.mp())
        .output()
        .unwrap();
    let took = t.elapsed();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut got = std::collections::BTreeMap::new();
    for line in String::from_utf8_lossy(&o.stdout).lines().skip(1) {
        let w: Vec<&str> = line.split_whitespace().collect();
        got.insert(w[w.len() - 1].to_string(), w[4].parse::<u64>().unwrap());
    }
    assert_eq!(got.len(), 1000, "entries listed");
    let wrong: Vec<_> = want
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} sizes wrong: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    eprintln!("ls -l of 1,000 containers on moto: {took:?}");
    assert!(took < Duration::from_secs(60), "ls -l took {took:?}");
    m.unmount();
}

/// `-o user=,password_file=` logs in to Caterva2; a wrong password is a
/// clear error, and the password never appears in what is printed.
#[test]
fn caterva2_logs_in_with_a_password_file() {
    let d = tempfile::tempdir().unwrap();
    let rel = "frame/blocks-lz4.b2frame";
    place(d.path(), rel);
    let Some(c2) = Caterva2::start(d.path()) else {
        return;
    };
    c2.add_user("reader@example.com", "s3cret-pass");
    let pw = d.path().join("pw");
    std::fs::write(&pw, "s3cret-pass\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
    let r = Remote::caterva2(&c2)
        .with("user=reader@example.com")
        .with(&format!("password_file={}", pw.display()));
    let o = r.cat(rel, None, &[]);
    assert!(o.status.success(), "{}", o.stderr);
    assert!(o.stdout == reference_bytes(rel));
    std::fs::write(&pw, "wrong-pass\n").unwrap();
    let o = r.cat(rel, None, &[]);
    assert!(!o.status.success(), "a wrong password was accepted");
    assert!(
        !o.stderr.is_empty() && !o.stderr.contains("wrong-pass"),
        "{}",
        o.stderr
    );
}

/// Plain HTTP with no manifest: the tree is listed by the server's
/// S3-style XML listing (`?list-type=2&delimiter=/`), directories included.
#[test]
fn http_without_a_manifest_lists_by_the_s3_style_listing() {
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    place(d.path(), "frame/blocks-lz4.b2frame");
    place(d.path(), "b2nd/array1-2d.b2nd");
    place(d.path(), "frame/blosclz-delta-ts8-s.b2frame");
    let Some(srv) = Faulty::start(d.path()) else {
        return;
    };
    let r = Remote::http(&srv);
    let mut m = r.mount(&[]);
    let mut top: Vec<String> = std::fs::read_dir(m.mp())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    top.sort();
    assert_eq!(top, ["b2nd", "frame"]);
    for (shown, rel) in [
        ("frame/blocks-lz4", "frame/blocks-lz4.b2frame"),
        (
            "frame/blosclz-delta-ts8-s",
            "frame/blosclz-delta-ts8-s.b2frame",
        ),
        ("b2nd/array1-2d.npy", "b2nd/array1-2d.b2nd"),
    ] {
        let got = std::fs::read(m.path(shown)).unwrap();
        assert!(got == reference_bytes(rel), "{shown}");
    }
    assert!(srv.stats()["lists"].as_u64().unwrap() > 0);
    m.unmount();
}

/// The S3 secret and session token never reach the daemon's log (at its
/// trace level, every FUSE request logged) or a message, on success or
/// failure.
#[test]
fn s3_credentials_never_reach_the_log() {
    if !crate::common::fuse_available() {
        return;
    }
    let Some(moto) = Moto::start() else { return };
    let d = tempfile::tempdir().unwrap();
    let rel = "frame/blocks-lz4.b2frame";
    place(d.path(), rel);
    moto.mkbucket("secrets");
    moto.upload("secrets", "p", d.path());
    let mut r = Remote::s3(&moto, "secrets", "p");
    let (secret, token) = ("SecretMark0123456789abcdef", "TokenMark0123456789abcdef");
    for (k, v) in [
        ("AWS_SECRET_ACCESS_KEY", secret),
        ("AWS_SESSION_TOKEN", token),
        ("BLOSCFS_LOG", "trace"),
        ("RUST_LOG", "trace"),
    ] {
        r.env.push((k.to_string(), Some(v.to_string())));
    }
    let mut m = r.mount(&["debug"]);
    let got = std::fs::read(m.path("frame/blocks-lz4")).unwrap();
    assert!(got == reference_bytes(rel));
    assert!(std::fs::read(m.path("frame/missing")).is_err());
    m.unmount();
    let log = m.log();
    assert!(log.len() > 1000, "trace log too short: {log}");
    let o = r.cat("no/such.b2frame", None, &[]);
    assert!(!o.status.success());
    for text in [&log, &o.stderr] {
        assert!(!text.contains(secret), "the secret was logged");
        assert!(!text.contains(token), "the session token was logged");
    }
}

/// `dir/x.bin` of 1 MiB, with its bytes and another version's of the same
/// length.
fn two_versions(dir: &Path) -> (std::path::PathBuf, Vec<u8>, Vec<u8>) {
    let old: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    let new: Vec<u8> = old.iter().map(|b| b ^ 0xff).collect();
    let p = dir.join("x.bin");
    std::fs::write(&p, &old).unwrap();
    (p, old, new)
}

/// Replace the bytes of `p` with `new`, keeping its modification time (as
/// a rewrite within the same second looks to a server).
fn rewrite_keeping_time(p: &Path, new: &[u8]) {
    let mtime = p.metadata().unwrap().modified().unwrap();
    std::fs::write(p, new).unwrap();
    let f = std::fs::File::options().write(true).open(p).unwrap();
    f.set_modified(mtime).unwrap();
}

/// A weak ETag promises no identical bytes: an object rewritten with the
/// same length, `Last-Modified` and weak ETag (nginx makes its weak tags
/// of those) is read by a new open as its new bytes, never as pages an
/// earlier open cached mixed with new ones.
#[test]
fn a_new_open_under_the_same_weak_etag_reads_no_page_of_an_earlier_open() {
    use blosc_decode::io::Source;
    use bloscfs_remote::{Entry, Location, Options, Remote};
    let d = tempfile::tempdir().unwrap();
    let (p, old, new) = two_versions(d.path());
    let len = old.len();
    let Some(srv) = Faulty::start(d.path()) else {
        return;
    };
    srv.set_fault("weak-etag");
    let url = format!("{}/x.bin", srv.base());
    let r = Remote::connect(Location::parse(&url).unwrap().unwrap(), Options::default()).unwrap();
    let stat = || match r.stat("").unwrap() {
        Entry::Object(o) => o,
        Entry::Dir => panic!("{url}: a directory"),
    };
    let obj = stat();
    assert!(obj.etag.as_deref().is_some_and(|e| e.starts_with("W/")));
    let first = r.open(&obj);
    let mut buf = vec![0u8; 4096];
    for at in [0, 300_000, len - 4096] {
        first.read_exact_at(at as u64, &mut buf).unwrap();
        assert!(buf[..] == old[at..at + 4096]);
    }
    rewrite_keeping_time(&p, &new);
    let again = stat();
    assert_eq!(
        again, obj,
        "the server shows the change: this tests nothing"
    );
    let mut all = vec![0u8; len];
    r.open(&again).read_exact_at(0, &mut all).unwrap();
    assert!(all == new, "a new open: {}", first_diff(&new, &all));
}

/// The same through a mount: an object without a strong ETag (a weak one;
/// a manifest gives none) rewritten with the same length and time keeps its
/// inode, so a new open must drop the pages the kernel cached for the
/// earlier one (no `FOPEN_KEEP_CACHE`), never mixing them with new bytes.
#[test]
fn a_mount_keeps_no_page_cache_of_an_object_without_a_strong_etag() {
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (p, old, new) = two_versions(d.path());
    write_manifest(d.path());
    let Some(srv) = Faulty::start(d.path()) else {
        return;
    };
    srv.set_fault("weak-etag");
    let mut m = Remote::http(&srv).mount(&[MANIFEST, "metadata_ttl=0"]);
    assert!(std::fs::read(m.path("x.bin")).unwrap() == old);
    let ino = std::fs::metadata(m.path("x.bin")).unwrap().ino();
    rewrite_keeping_time(&p, &new);
    assert_eq!(
        std::fs::metadata(m.path("x.bin")).unwrap().ino(),
        ino,
        "the mount shows the change: this tests nothing"
    );
    let got = std::fs::read(m.path("x.bin")).unwrap();
    assert!(got == new, "a new open: {}", first_diff(&new, &got));
    m.unmount();
}

/// An object `k` beside a prefix `k/`: the mount shows the directory, and
/// `cat` and `info` of `k` agree (a directory, not a sparse frame) while
/// `k/inner` reads.
#[test]
fn cat_and_info_of_an_object_that_is_also_a_prefix_see_the_directory() {
    let Some(moto) = Moto::start() else { return };
    let rel = "frame/blocks-lz4.b2frame";
    moto.mkbucket("both");
    moto.put("both", "k", &fixture(rel));
    moto.put("both", "k/inner.b2frame", &fixture(rel));
    let r = Remote::s3(&moto, "both", "");
    let local = std::process::Command::new(bin())
        .arg("cat")
        .arg(fixture(rel))
        .output()
        .unwrap();
    let want = local.stdout;
    let o = r.cat("k/inner.b2frame", None, &[]);
    assert!(o.status.success(), "{}", o.stderr);
    assert!(
        o.stdout == want,
        "k/inner: {}",
        first_diff(&want, &o.stdout)
    );
    for o in [r.cat("k", None, &[]), r.info("k", &[])] {
        assert_eq!(o.status.code(), Some(1), "{}", o.stderr);
        assert!(o.stdout.is_empty(), "the object k was read");
        assert!(
            o.stderr.contains("s3://both/k: a directory"),
            "{}",
            o.stderr
        );
    }
    if !fuse_available() {
        return;
    }
    let mut m = r.mount(&[]);
    assert!(m.path("k").is_dir());
    let inner = bloscfs::names::presented_name("inner.b2frame".as_ref(), false);
    let got = std::fs::read(m.path("k").join(inner)).unwrap();
    assert!(
        got == want,
        "k/inner through the mount: {}",
        first_diff(&want, &got)
    );
    m.unmount();
}
