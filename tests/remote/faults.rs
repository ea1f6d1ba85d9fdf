//! What real servers rarely do on cue, done by the fault server: each
//! fault gives a clear error (naming the object) or a successful retry,
//! never wrong bytes, never a hang (every request has `-o timeout=2`).

use crate::counts::Big;
use crate::harness::*;
use crate::servers::*;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// Bound on a command that fails after its retries: 4 attempts of at most
/// 2 s each, backoff, and a process start.
const FAILS_WITHIN: Duration = Duration::from_secs(30);

fn fast(b: &Big) -> Remote {
    b.r.with("timeout=2")
}

/// `cat` of `big.b2frame` through `r`: succeeded with exactly the right
/// bytes, or failed clearly (naming the object) in bounded time, having
/// written no wrong byte. True if it succeeded.
fn exact_or_clear_error(r: &Remote, raw: &[u8], what: &str) -> bool {
    let o = r.cat("big.b2frame", None, &[]);
    if o.status.success() {
        assert!(o.stdout == raw, "{what}: {}", first_diff(raw, &o.stdout));
        return true;
    }
    assert!(
        raw.starts_with(&o.stdout),
        "{what}: wrong bytes written before failing: {}",
        first_diff(raw, &o.stdout)
    );
    assert!(
        o.stderr.contains("big.b2frame"),
        "{what}: the error does not name the object: {}",
        o.stderr
    );
    assert!(o.took < FAILS_WITHIN, "{what}: failed after {:?}", o.took);
    false
}

fn base_with_fault(b: &Big, mode: &str) -> Remote {
    let mut r = fast(b);
    r.base = format!("{}/_f/{mode}", r.base);
    r
}

/// The fault server itself: ranges, ETags, If-Match, and each fault as
/// its docstring says (else the tests above could pass without a fault).
#[test]
fn the_fault_server_does_what_it_says() {
    let d = tempfile::tempdir().unwrap();
    let body: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(d.path().join("f.bin"), &body).unwrap();
    let Some(s) = Faulty::start(d.path()) else {
        return;
    };
    let a = s.get("/f.bin", &["Range: bytes=100-199"]);
    assert_eq!((a.status, &a.body[..]), (206, &body[100..200]));
    assert_eq!(a.header("content-range"), Some("bytes 100-199/10000"));
    let tag = a.header("etag").unwrap().to_string();
    let ok = s.get("/f.bin", &["Range: bytes=-10", &format!("If-Match: {tag}")]);
    assert_eq!((ok.status, &ok.body[..]), (206, &body[9990..]));
    assert_eq!(s.get("/f.bin", &["If-Match: \"other\""]).status, 412);
    assert_eq!(s.get("/f.bin", &["Range: bytes=0-1,5-6"]).status, 400);
    let a = s.get("/_f/ignore-range/f.bin", &["Range: bytes=100-199"]);
    assert_eq!((a.status, a.body.len()), (200, body.len()));
    let a = s.get("/_f/no-suffix/f.bin", &["Range: bytes=-10"]);
    assert_eq!((a.status, a.body.len()), (200, body.len()));
    let a = s.get("/_f/no-suffix/f.bin", &["Range: bytes=100-199"]);
    assert_eq!((a.status, &a.body[..]), (206, &body[100..200]));
    let a = s.get("/_f/short-range/f.bin", &["Range: bytes=100-199"]);
    assert_eq!(a.header("content-range"), Some("bytes 100-149/10000"));
    assert_eq!(a.body, body[100..150]);
    s.set_fault("5xx:2");
    let codes: Vec<u16> = (0..3).map(|_| s.get("/f.bin", &[]).status).collect();
    assert_eq!(codes, [503, 503, 200]);
    s.set_fault("drop&count=1");
    let a = s.get("/f.bin", &[]);
    assert_eq!((a.status, a.body.len()), (200, body.len() / 2));
    assert_eq!(s.get("/f.bin", &[]).body, body);
    s.set_fault("etag-change&count=1");
    let a = s.get("/f.bin", &[&format!("If-Match: {tag}")]);
    assert_eq!(a.status, 200);
    assert_ne!(a.header("etag"), Some(tag.as_str()));
    s.set_fault("stall:1&count=1");
    let t = Instant::now();
    assert_eq!(s.get("/f.bin", &[]).status, 200);
    assert!(t.elapsed() >= Duration::from_secs(1));
    let st = s.stats();
    assert_eq!(st["faulted"]["5xx"], 2, "{st}");
    assert_eq!(st["heads"], 0);
    s.reset();
    assert_eq!(s.gets(), 0);
}

#[test]
fn a_200_to_a_ranged_get_is_refused_never_read_as_the_range() {
    let Some(b) = Big::start() else { return };
    let raw = b.raw("big");
    let ok = exact_or_clear_error(&base_with_fault(&b, "ignore-range"), &raw, "ignore-range");
    assert!(b.srv.faulted("ignore-range") > 0);
    assert!(!ok, "a 200 answer to a ranged GET was accepted");
}

/// A server that answers a suffix range with the whole object but serves
/// other ranges: the object's first bytes, asked for instead, are read as
/// its first bytes (they were once kept as its tail).
#[test]
fn a_server_without_suffix_ranges_serves_exact_bytes() {
    let Some(b) = Big::start() else { return };
    let raw = b.raw("big");
    let ok = exact_or_clear_error(&base_with_fault(&b, "no-suffix"), &raw, "no-suffix");
    assert!(b.srv.faulted("no-suffix") > 0);
    assert!(ok, "a server without suffix ranges was refused");
}

#[test]
fn a_short_content_range_never_gives_wrong_bytes() {
    let Some(b) = Big::start() else { return };
    let raw = b.raw("big");
    exact_or_clear_error(&base_with_fault(&b, "short-range"), &raw, "short-range");
    assert!(b.srv.faulted("short-range") > 0);
}

#[test]
fn server_errors_are_retried_then_reported() {
    let Some(b) = Big::start() else { return };
    let raw = b.raw("big");
    b.srv.set_fault("5xx:2");
    assert!(
        exact_or_clear_error(&fast(&b), &raw, "two 503s"),
        "two 503s were not retried"
    );
    b.srv.set_fault("5xx:100000");
    assert!(!exact_or_clear_error(&fast(&b), &raw, "503s for ever"));
    b.srv.set_fault("none");
    assert!(exact_or_clear_error(&fast(&b), &raw, "after the 503s"));
}

#[test]
fn a_connection_dropped_mid_body_is_retried_then_reported() {
    let Some(b) = Big::start() else { return };
    let raw = b.raw("big");
    b.srv.set_fault("drop&count=1");
    assert!(
        exact_or_clear_error(&fast(&b), &raw, "one drop"),
        "one dropped body was not retried"
    );
    b.srv.set_fault("drop");
    assert!(!exact_or_clear_error(&fast(&b), &raw, "drops for ever"));
}

#[test]
fn a_stall_past_the_timeout_is_retried_then_reported() {
    let Some(b) = Big::start() else { return };
    let raw = b.raw("big");
    b.srv.set_fault("stall:5&count=1");
    assert!(
        exact_or_clear_error(&fast(&b), &raw, "one stall"),
        "one stalled request was not retried"
    );
    b.srv.set_fault("stall:120");
    assert!(!exact_or_clear_error(&fast(&b), &raw, "stalls for ever"));
}

/// A mount of `big` with `-o timeout=2`, a handle of it with the block at
/// chunk 0 read, and `big`'s bytes.
fn mounted(b: &Big) -> (RemoteMount, std::fs::File, Vec<u8>) {
    let raw = b.raw("big");
    let m = fast(b).mount(&[MANIFEST]);
    let f = std::fs::File::open(m.path("big")).unwrap();
    let mut buf = vec![0u8; 4096];
    f.read_exact_at(&mut buf, at(0) as u64).unwrap();
    assert!(buf[..] == raw[at(0)..at(0) + 4096]);
    (m, f, raw)
}

/// An offset in block 1 of chunk `c` of `big`.
fn at(c: usize) -> usize {
    c * (2 << 20) + 300_000
}

/// Through a mount: an object whose ETag changes under an open handle (the
/// server ignoring If-Match, as Caterva2 does) fails that handle's reads of
/// blocks not yet fetched, never serving bytes of two versions; a new open
/// once the server is back to the first version reads it.
#[test]
fn a_changed_etag_under_an_open_handle_fails_its_reads() {
    if !crate::common::fuse_available() {
        return;
    }
    let Some(b) = Big::start() else { return };
    let (mut m, f, raw) = mounted(&b);
    let mut buf = vec![0u8; 4096];
    b.srv.set_fault("etag-change");
    let before = b.srv.faulted("etag-change");
    match f.read_exact_at(&mut buf, at(5) as u64) {
        Ok(()) => panic!(
            "a read through a handle of a changed object succeeded; GETs: {}",
            b.srv.stats()["ranges"]
        ),
        Err(e) => assert!(
            matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::ESTALE)),
            "{e}"
        ),
    }
    assert!(
        b.srv.faulted("etag-change") > before,
        "no GET after the change"
    );
    b.srv.set_fault("none");
    drop(f);
    let f = std::fs::File::open(m.path("big")).unwrap();
    f.read_exact_at(&mut buf, at(5) as u64).unwrap();
    assert!(buf[..] == raw[at(5)..at(5) + 4096]);
    drop(f);
    m.unmount();
}

/// Through a mount: a hung server gives the read EIO (or ETIMEDOUT) in
/// bounded time, and once the server answers again the same handle reads.
#[test]
fn a_hung_server_fails_a_read_in_bounded_time_and_the_mount_recovers() {
    if !crate::common::fuse_available() {
        return;
    }
    let Some(b) = Big::start() else { return };
    let (mut m, f, raw) = mounted(&b);
    let mut buf = vec![0u8; 4096];
    b.srv.set_fault("stall:120");
    let t = Instant::now();
    let r = f.read_exact_at(&mut buf, at(6) as u64);
    assert!(
        t.elapsed() < FAILS_WITHIN,
        "a read of a hung server took {:?}",
        t.elapsed()
    );
    let e = r.expect_err("a read of a hung server succeeded");
    assert!(
        matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::ETIMEDOUT)),
        "{e}"
    );
    assert!(b.srv.faulted("stall") > 0);
    b.srv.set_fault("none");
    f.read_exact_at(&mut buf, at(7) as u64).unwrap();
    assert!(buf[..] == raw[at(7)..at(7) + 4096]);
    drop(f);
    m.unmount();
}

/// Through a mount: while one read waits on a stalled request, a read of
/// another file is served at once (a hung request holds one FUSE thread,
/// not the daemon); the stalled read then retries and gets exact bytes.
#[test]
fn a_stalled_read_does_not_hold_up_other_files() {
    if !crate::common::fuse_available() {
        return;
    }
    let Some(b) = Big::start() else { return };
    let (mut m, f, raw) = mounted(&b);
    let raw2 = b.raw("big2");
    let f2 = std::fs::File::open(m.path("big2")).unwrap();
    let mut buf = vec![0u8; 4096];
    f2.read_exact_at(&mut buf, at(0) as u64).unwrap();
    b.settled_gets();
    b.srv.set_fault("stall:4&count=1");
    let stalled = std::thread::spawn(move || {
        let mut buf = vec![0u8; 4096];
        let t = Instant::now();
        let r = f.read_exact_at(&mut buf, at(5) as u64);
        (r.map(|()| buf), f, t.elapsed())
    });
    let t = Instant::now();
    while b.srv.faulted("stall") == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the read never reached the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    f2.read_exact_at(&mut buf, at(6) as u64).unwrap();
    let took = t.elapsed();
    assert!(buf[..] == raw2[at(6)..at(6) + 4096]);
    assert!(
        took < Duration::from_millis(1500),
        "another file's read took {took:?}"
    );
    let (r, f, waited) = stalled.join().unwrap();
    eprintln!("the stalled read took {waited:?}, the other {took:?}");
    match r {
        Ok(got) => assert!(got[..] == raw[at(5)..at(5) + 4096], "the stalled read"),
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}"),
    }
    drop((f, f2));
    m.unmount();
}

/// `cat` of a remote directory (a sparse frame's prefix) that cannot be
/// listed says why (the manifest's URL and status), not only `EIO`.
#[test]
fn cat_says_why_a_remote_directory_cannot_be_read() {
    let d = tempfile::tempdir().unwrap();
    let Some(s) = Faulty::start(d.path()) else {
        return;
    };
    let r = Remote::http(&s).with("manifest=missing.txt");
    let o = r.cat("", None, &[]);
    assert!(!o.status.success());
    assert!(
        o.stderr.contains("/missing.txt: 404"),
        "no reason given: {}",
        o.stderr
    );
}

/// Through a mount listed by the S3-style listing: answers that go on for
/// 1 GiB past what they should (after a range, after a listing) fail that
/// read or listing at once, and the daemon holds no more than it asked
/// for; once the server behaves, the same handle reads exact bytes.
#[test]
fn answers_longer_than_asked_are_cut_off_not_gathered() {
    if !crate::common::fuse_available() {
        return;
    }
    let Some(b) = Big::start() else { return };
    let raw = b.raw("big");
    let mut m = fast(&b).mount(&[]);
    let f = std::fs::File::open(m.path("big")).unwrap();
    let mut buf = vec![0u8; 4096];
    f.read_exact_at(&mut buf, at(0) as u64).unwrap();
    let before = peak_rss(m.pid());
    // A listing is read up to 64 MiB (a buffer of up to 128 MiB as it grows).
    let grown = |what: &str| {
        let g = peak_rss(m.pid()).saturating_sub(before);
        assert!(g < 192 << 20, "{what}: the daemon grew by {} MiB", g >> 20);
    };

    b.srv.set_fault("overlong:1024");
    let t = Instant::now();
    let e = f
        .read_exact_at(&mut buf, at(5) as u64)
        .expect_err("a read of an overlong answer succeeded");
    grown("a range");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert!(t.elapsed() < FAILS_WITHIN, "took {:?}", t.elapsed());
    assert!(b.srv.faulted("overlong") > 0);

    // What a listing said is trusted for a second.
    std::thread::sleep(Duration::from_millis(1500));
    let lists = b.srv.stats()["lists"].as_u64().unwrap();
    let t = Instant::now();
    let listed = std::fs::read_dir(m.mp()).map(|d| d.count());
    assert!(t.elapsed() < FAILS_WITHIN, "took {:?}", t.elapsed());
    grown("a listing");
    assert!(
        b.srv.stats()["lists"].as_u64().unwrap() > lists,
        "not listed again"
    );
    assert!(
        !matches!(listed, Ok(n) if n > 0),
        "listed {listed:?} from an overlong answer"
    );

    b.srv.set_fault("none");
    f.read_exact_at(&mut buf, at(6) as u64).unwrap();
    assert!(buf[..] == raw[at(6)..at(6) + 4096]);
    assert!(std::fs::read_dir(m.mp()).unwrap().count() > 3);
    drop(f);
    m.unmount();
}

/// A listing whose pages would lead on for ever (the same continuation
/// token again and again) fails in bounded time, naming the token: over S3
/// (the fault server answers path-style S3 requests too) and over the
/// S3-style listing of plain HTTP. Once the server behaves, both mount.
#[test]
fn a_listing_that_would_not_end_fails() {
    if !crate::common::fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rel = "frame/blocks-lz4.b2frame";
    let top = d.path().join("bucket/p");
    std::fs::create_dir_all(top.join("frame")).unwrap();
    crate::common::copy(&crate::common::fixture(rel), &top.join(rel));
    let Some(s) = Faulty::start(d.path()) else {
        return;
    };
    let s3 = Remote {
        base: "s3://bucket/p".into(),
        opts: vec![format!("endpoint={}", s.base()), "region=us-east-1".into()],
        env: Moto::env()
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect(),
    };
    let mut http = Remote::http(&s);
    http.base = format!("{}/bucket/p/", s.base());
    for r in [s3, http.with("timeout=2")] {
        let r = r.with("timeout=2");
        s.set_fault("endless");
        let mp = tempfile::tempdir().unwrap();
        let mut c = std::process::Command::new(crate::common::bin());
        c.arg("-f").arg(&r.base).arg(mp.path());
        c.args(["-o", &r.opts.join(",")]);
        for (k, v) in &r.env {
            c.env(k, v.as_deref().unwrap());
        }
        let o = run(c, FAILS_WITHIN);
        assert!(
            !o.status.success(),
            "{}: mounted an endless listing",
            r.base
        );
        assert!(
            o.stderr.contains("continuation token \"again\" again"),
            "{}: {}",
            r.base,
            o.stderr
        );
        s.set_fault("none");
        let mut m = r.mount(&[]);
        let got = std::fs::read(m.path("frame/blocks-lz4")).unwrap();
        assert!(got == crate::common::reference_bytes(rel), "{}", r.base);
        m.unmount();
    }
}
