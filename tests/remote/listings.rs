//! Listings of large and failing remote directories, on the fault
//! server's synthetic directory `d` of N objects (under `/_big/N/`, listed
//! in pages of 1,000):
//! a directory is listed once however many lookups arrive while it is
//! listed, and a store that dies during or after a listing gives `EIO` or
//! the whole directory, never a part of it with success.

use crate::common::*;
use crate::harness::*;
use crate::servers::*;

/// A mount of the tree holding `f`'s synthetic directory `d` of `n`
/// objects.
fn big_mount(f: &Faulty, n: usize, extra: &[&str]) -> RemoteMount {
    let mut r = Remote::http(f);
    r.base = format!("{}/_big/{n}/", f.base());
    r.mount(extra)
}

/// A fault server (over an empty directory, kept beside it) to mount its
/// synthetic directories; `None` (skipped) without FUSE or python.
fn server() -> Option<(Faulty, tempfile::TempDir)> {
    if !fuse_available() {
        return None;
    }
    let d = tempfile::tempdir().unwrap();
    Some((Faulty::start(d.path())?, d))
}

/// A mount of `d` of `n` objects whose store dies after `k` more listing
/// pages.
fn dying(f: &Faulty, n: usize, opts: &[&str], k: u32) -> RemoteMount {
    let m = big_mount(f, n, opts);
    f.reset();
    post(f, &format!("/_fault?mode=down-after:{k}"));
    m
}

/// `POST path` to the fault server.
pub fn post(f: &Faulty, path: &str) {
    let a = http(f.0.port, "POST", path, &[]).unwrap();
    assert_eq!(a.status, 204, "POST {path}");
}

/// Answers held by the fault server are released when this goes (a test
/// that fails leaves no thread waiting).
pub struct Release<'a>(pub &'a Faulty);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        let _ = http(self.0 .0.port, "POST", "/_release", &[]);
    }
}

/// This thread's id (`/proc/self/task/ID`).
pub fn thread_id() -> String {
    let link = std::fs::read_link("/proc/thread-self").unwrap();
    link.file_name().unwrap().to_string_lossy().into_owned()
}

/// Wait until thread `tid` of this process is blocked on the mount: in a
/// FUSE request the daemon has not answered, or waiting for another
/// lookup of the same name that is (`d_alloc_parallel`).
pub fn wait_in_fuse(tid: &str) {
    let wchan = format!("/proc/self/task/{tid}/wchan");
    let blocked = |w: String| {
        ["fuse", "request_wait", "d_alloc_parallel"]
            .iter()
            .any(|k| w.contains(k))
    };
    wait_for(
        || std::fs::read_to_string(&wchan).is_ok_and(blocked),
        "a request waiting for the daemon",
    );
}

/// `ls -f` of a directory of 100,000 objects costs one listing of it (100
/// pages), and lookups made while it is listed (its 51st page held by the
/// server until they are all waiting in the daemon) wait for that listing
/// and are answered from it: none starts another.
#[test]
fn a_directory_of_100k_objects_is_listed_once_whatever_the_lookups() {
    let Some((f, _dir)) = server() else {
        return;
    };
    let n = 100_000;
    let mut m = big_mount(&f, n, &[]);
    f.reset();
    post(&f, "/_hold?prefix=/_big/100000/%3Fpage%3D50000");
    let release = Release(&f);
    let d = m.path("d");
    let ls = std::thread::spawn(move || std::fs::read_dir(d).map(|d| d.count()));
    wait_for(
        || f.stats()["held"] == 1,
        "the listing to reach its 51st page",
    );
    let lookups: Vec<_> = ["f0000001", "f0099999", "f0100000", "missing"]
        .into_iter()
        .map(|name| {
            let p = m.path(&format!("d/{name}"));
            let (tx, rx) = std::sync::mpsc::channel();
            let h = std::thread::spawn(move || {
                tx.send(thread_id()).unwrap();
                std::fs::metadata(p).map(|md| md.len())
            });
            let tid = rx.recv().unwrap();
            wait_in_fuse(&tid);
            h
        })
        .collect();
    drop(release);
    assert_eq!(ls.join().unwrap().unwrap(), n);
    let got: Vec<_> = lookups
        .into_iter()
        .map(|h| h.join().unwrap().map_err(|e| e.raw_os_error()))
        .collect();
    let enoent = Err(Some(libc::ENOENT));
    assert_eq!(got, [Ok(8), Ok(8), enoent, enoent]);
    // d's 100 pages once, and the root's one page each time its listing
    // expired (metadata_ttl=1): a second listing of d would make 200.
    let lists = f.stats()["lists"].as_u64().unwrap();
    assert!(
        (100..150).contains(&lists),
        "{lists} listing pages for one ls and four lookups during it\n{}",
        m.log()
    );
    m.unmount();
}

/// The store dies once the listing of a directory of 3,000 objects is done (every later
/// request a 503) while `metadata_ttl=0` has the entries' stats ask again:
/// `ls` shows the whole directory (from its listing) or fails with `EIO`,
/// never an empty or partial directory with success, and asks the dead
/// store a bounded number of times (not once per entry).
#[test]
fn a_store_that_dies_after_its_listing_gives_all_or_eio() {
    let Some((f, _dir)) = server() else {
        return;
    };
    let opts = ["metadata_ttl=0", "retries=0", "timeout=2"];
    // The root's listing (if it is listed again) and d's 3 pages.
    let mut m = dying(&f, 3000, &opts, 4);
    // The failure may come with the open or with a later getdents.
    match std::fs::read_dir(m.path("d")).and_then(|d| d.collect::<Result<Vec<_>, _>>()) {
        Ok(d) => assert_eq!(d.len(), 3000, "listed with success"),
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}"),
    }
    let down = f.faulted("down");
    assert!(down < 300, "{down} requests to the dead store");
    m.unmount();
}

/// The store dies in the middle of a listing (by its third page a 503,
/// and every request after): `ls` fails with `EIO`, in a bounded number of
/// requests (the retries of that page and of a few stats, not one per
/// entry).
#[test]
fn a_store_that_dies_during_a_listing_fails_it_with_eio() {
    let Some((f, _dir)) = server() else {
        return;
    };
    let mut m = dying(&f, 5000, &["timeout=2"], 2);
    let e = std::fs::read_dir(m.path("d")).expect_err("a listing that failed midway");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}\n{}", m.log());
    let down = f.faulted("down");
    assert!(down < 200, "{down} requests to the dead store\n{}", m.log());
    m.unmount();
}
