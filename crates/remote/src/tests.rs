//! Reads against a scripted HTTP server on 127.0.0.1: the failures real
//! servers rarely show on cue each give an error or a successful retry,
//! never wrong bytes, never a hang.

use crate::{Location, Object, Options, Remote};
use blosc_decode::error::ErrorKind;
use blosc_decode::io::Source;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the server does with request number `n` for bytes `a..=b`.
enum Act {
    /// 206 with this ETag and object; cut the body after `cut` bytes.
    Partial(&'static str, Vec<u8>, Option<usize>),
    /// 200 with the whole object (a server ignoring `Range`).
    Whole(Vec<u8>),
    /// 206 claiming a shorter range than asked.
    Short(Vec<u8>),
    /// Accept and never answer.
    Stall,
}

/// Serve `script` (request number, range) -> action, until the test ends.
fn serve(script: impl Fn(usize, u64, u64) -> Act + Send + 'static) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/x.bin", l.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let n = count.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { return };
            let mut range = (0, 0);
            let mut r = BufReader::new(c.try_clone().unwrap());
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 2 {
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
                    let (a, b) = v.trim().split_once('-').unwrap();
                    range = (a.parse().unwrap(), b.parse().unwrap());
                }
                line.clear();
            }
            let (a, b) = range;
            let mut resp = |status: &str, etag: &str, cr: String, body: &[u8], cut: usize| {
                let head = format!(
                    "HTTP/1.1 {status}\r\nETag: {etag}\r\nAccept-Ranges: bytes\r\n{cr}Content-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = c.write_all(head.as_bytes());
                let _ = c.write_all(&body[..cut.min(body.len())]);
            };
            match script(n.fetch_add(1, Ordering::SeqCst), a, b) {
                Act::Partial(etag, obj, cut) => {
                    let body = &obj[a as usize..=b as usize];
                    let cr = format!("Content-Range: bytes {a}-{b}/{}\r\n", obj.len());
                    resp(
                        "206 Partial Content",
                        etag,
                        cr,
                        body,
                        cut.unwrap_or(usize::MAX),
                    );
                }
                Act::Whole(obj) => resp("200 OK", "\"v1\"", String::new(), &obj, usize::MAX),
                Act::Short(obj) => {
                    let cr = format!("Content-Range: bytes {a}-{}/{}\r\n", b - 1, obj.len());
                    resp(
                        "206 Partial Content",
                        "\"v1\"",
                        cr,
                        &obj[a as usize..b as usize],
                        usize::MAX,
                    );
                }
                Act::Stall => {
                    std::thread::sleep(Duration::from_secs(5));
                }
            }
        }
    });
    (url, count)
}

fn object(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

fn open(url: &str, len: usize, etag: &str) -> Arc<crate::RemoteObject> {
    let loc = Location::parse(url).unwrap().unwrap();
    let opts = Options {
        timeout: Duration::from_millis(400),
        retries: 2,
        ..Options::default()
    };
    let r = Remote::connect(loc, opts).unwrap();
    let obj = Object {
        key: String::new(),
        len: len as u64,
        etag: Some(etag.into()),
        mtime: None,
    };
    r.open(&obj)
}

#[test]
fn a_good_server_gives_the_bytes() {
    let (url, n) = serve(|_, _, _| Act::Partial("\"v1\"", object(300_000), None));
    let src = open(&url, 300_000, "\"v1\"");
    let mut buf = vec![0; 5000];
    src.read_exact_at(123_456, &mut buf).unwrap();
    assert_eq!(buf, object(300_000)[123_456..128_456]);
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn a_200_to_a_range_is_refused() {
    let (url, _) = serve(|_, _, _| Act::Whole(object(300_000)));
    let e = open(&url, 300_000, "\"v1\"")
        .read_exact_at(70_000, &mut [0; 100])
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io, "{e:?}");
    assert!(e.reason.contains("bytes 65536-131071"), "{}", e.reason);
}

#[test]
fn a_changed_etag_is_a_changed_object() {
    let (url, _) = serve(|_, _, _| Act::Partial("\"v2\"", object(300_000), None));
    let e = open(&url, 300_000, "\"v1\"")
        .read_exact_at(0, &mut [0; 100])
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Changed, "{e:?}");
    // A different length is a change too.
    let (url, _) = serve(|_, _, _| Act::Partial("\"v1\"", object(200_000), None));
    let e = open(&url, 300_000, "\"v1\"")
        .read_exact_at(0, &mut [0; 100])
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Changed, "{e:?}");
}

#[test]
fn a_body_cut_short_is_retried() {
    let (url, n) =
        serve(|i, _, _| Act::Partial("\"v1\"", object(300_000), (i == 0).then_some(1000)));
    let mut buf = vec![0; 100];
    open(&url, 300_000, "\"v1\"")
        .read_exact_at(200_000, &mut buf)
        .unwrap();
    assert_eq!(buf, object(300_000)[200_000..200_100]);
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

#[test]
fn a_short_content_range_is_an_error() {
    let (url, _) = serve(|_, _, _| Act::Short(object(300_000)));
    let e = open(&url, 300_000, "\"v1\"")
        .read_exact_at(0, &mut [0; 100])
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io, "{e:?}");
}

#[test]
fn a_stalled_server_fails_the_read_in_bounded_time() {
    let (url, _) = serve(|_, _, _| Act::Stall);
    let t = Instant::now();
    let e = open(&url, 300_000, "\"v1\"")
        .read_exact_at(0, &mut [0; 100])
        .unwrap_err();
    assert_eq!(e.errno(), libc::ETIMEDOUT, "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}
