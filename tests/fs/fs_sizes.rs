//! The presented tree (no mount) of frames that fail to open and of frames
//! of mixed chunk sizes: what `stat` says and what reads return always
//! agree, and an unchanged file is never reported as changed.

use crate::common;
use bloscfs::fs::{Filled, Fs, FsOptions, ROOT_INO};
use common::*;
use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Mutex;

/// Warnings logged by this test binary.
static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            LINES.lock().unwrap().push(r.args().to_string());
        }
    }
    fn flush(&self) {}
}

fn capture_log() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        log::set_logger(&Capture).unwrap();
        log::set_max_level(log::LevelFilter::Warn);
    });
}

/// The warnings naming `p`.
fn logged(p: &Path) -> Vec<String> {
    let p = p.to_str().unwrap();
    LINES
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(p))
        .cloned()
        .collect()
}

/// A frame of `tests/fixtures/writers/sizes/<release>/` and what its
/// manifest says of it: (declared size, SHA-256 of the writer's content).
fn writer_frame(release: &str, name: &str) -> (std::path::PathBuf, u64, String) {
    let dir = fixture("writers/sizes").join(release);
    let f = manifest_entry(&dir.join("manifest.json"), "files", name);
    (
        dir.join(name),
        f["nbytes"].as_u64().unwrap(),
        f["sha256"].as_str().unwrap().to_string(),
    )
}

/// Frames whose header parses but which fail to open (one cut short in its
/// chunks, and a contiguous and a sparse frame python-blosc2 2.2.9 lost a
/// chunk of): listed under their container names with their declared
/// sizes, before and after an open is tried; every open fails with EIO; one
/// warning each, none saying "changed". Repaired, they open and read whole.
#[test]
fn a_frame_that_fails_to_open_keeps_its_listing_and_its_opens_fail() {
    capture_log();
    let d = tempfile::tempdir().unwrap();
    let s = d.path();
    let good = std::fs::read(fixture("frame/blocks-lz4.b2frame")).unwrap();
    let want = reference_bytes("frame/blocks-lz4.b2frame");
    std::fs::write(s.join("cut.b2frame"), &good[..good.len() / 2]).unwrap();
    let (lost_c, lost_c_len, _) = writer_frame("2.2.9", "lost-c.b2frame");
    let (lost_s, lost_s_len, _) = writer_frame("2.2.9", "lost-s.b2frame");
    copy(&lost_c, &s.join("lost-c.b2frame"));
    copy(&lost_s, &s.join("lost-s.b2frame"));
    let fs = Fs::new(s, &FsOptions::default()).unwrap();
    let listed = [".", "..", "cut", "lost-c", "lost-s"];
    assert_eq!(names(&fs, ROOT_INO), listed);
    for (name, len) in [
        ("cut", want.len() as u64),
        ("lost-c", lost_c_len),
        ("lost-s", lost_s_len),
    ] {
        let a = fs.lookup(ROOT_INO, OsStr::new(name)).unwrap();
        assert_eq!(a.size, len, "{name}: listed size");
        for _ in 0..3 {
            assert_eq!(fs.open(a.ino, false).unwrap_err(), libc::EIO, "{name}");
        }
        assert_eq!(fs.getattr(a.ino).unwrap().size, len, "{name}: after");
        assert_eq!(
            fs.lookup(ROOT_INO, OsStr::new(name)).unwrap().size,
            len,
            "{name}: looked up again"
        );
    }
    assert_eq!(names(&fs, ROOT_INO), listed, "the listing is as it was");
    for src in ["cut.b2frame", "lost-c.b2frame", "lost-s.b2frame"] {
        let lines = logged(&s.join(src));
        assert_eq!(lines.len(), 1, "{src}: {lines:?}");
        assert!(lines[0].contains("opens fail with EIO"), "{}", lines[0]);
        assert!(!lines[0].contains("changed"), "{}", lines[0]);
    }
    // Repaired in place (the cut one) and replaced by a frame of a later
    // release that keeps its chunks (the lost one): served whole.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(s.join("cut.b2frame"), &good).unwrap();
    let (later, later_len, later_sha) = writer_frame("4.14.1", "lost-c.b2frame");
    std::fs::write(s.join("lost-c.b2frame"), std::fs::read(later).unwrap()).unwrap();
    for (name, len, sha) in [
        (
            "cut",
            want.len() as u64,
            format!("{:x}", Sha256::digest(&want)),
        ),
        ("lost-c", later_len, later_sha),
    ] {
        let a = fs.lookup(ROOT_INO, OsStr::new(name)).unwrap();
        assert_eq!(a.size, len, "{name}");
        let (fh, _) = fs.open(a.ino, false).unwrap();
        let got = fs.read(fh, 0, (len + 4096) as u32).unwrap();
        assert_eq!(format!("{:x}", Sha256::digest(&got)), sha, "{name}");
    }
    let changed: Vec<_> = logged(s)
        .into_iter()
        .filter(|l| l.contains("changed"))
        .collect();
    assert!(changed.is_empty(), "{changed:?}");
}

/// Frames of mixed chunk sizes (python-blosc2 2.2.9, contiguous and
/// sparse): paged reads of exactly the listed size, the last page first,
/// return the writer's bytes; nothing is reported changed.
#[test]
fn a_frame_of_mixed_chunk_sizes_reads_as_long_as_it_is_listed() {
    capture_log();
    let d = tempfile::tempdir().unwrap();
    let s = d.path();
    let mut frames = Vec::new();
    for name in ["mid-c", "mid-s", "start-c", "insert-s"] {
        let (p, len, sha) = writer_frame("2.2.9", &format!("{name}.b2frame"));
        copy(&p, &s.join(format!("{name}.b2frame")));
        frames.push((name, len, sha));
    }
    let fs = Fs::new(s, &FsOptions::default()).unwrap();
    for (name, len, sha) in frames {
        let a = fs.lookup(ROOT_INO, OsStr::new(name)).unwrap();
        assert_eq!(a.size, len, "{name}: listed size");
        let (fh, _) = fs.open(a.ino, false).unwrap();
        let pages = len.div_ceil(4096);
        let mut got = vec![0u8; len as usize];
        let mut buf = Vec::new();
        for page in (0..pages).rev() {
            let at = page * 4096;
            match fs.read_request(
                fh,
                at,
                4096,
                true,
                &mut buf,
                &mut blosc_decode::Deferred::new(),
            ) {
                Ok(Filled::Buf) => {}
                r => panic!("{name}: page {page}: {r:?}"),
            }
            assert_eq!(buf.len() as u64, 4096.min(len - at), "{name}: page {page}");
            got[at as usize..at as usize + buf.len()].copy_from_slice(&buf);
        }
        assert_eq!(format!("{:x}", Sha256::digest(&got)), sha, "{name}");
        assert_eq!(fs.getattr(a.ino).unwrap().size, len, "{name}");
        // No holes: data to the listed end, first asked on a fresh open.
        let (fresh, _) = fs.open(a.ino, false).unwrap();
        let near_end = len as i64 - 10;
        assert_eq!(fs.lseek(fresh, near_end, libc::SEEK_DATA), Ok(near_end));
        assert_eq!(fs.lseek(fresh, 0, libc::SEEK_HOLE), Ok(len as i64));
    }
    let changed: Vec<_> = logged(s)
        .into_iter()
        .filter(|l| l.contains("changed"))
        .collect();
    assert!(changed.is_empty(), "{changed:?}");
}
