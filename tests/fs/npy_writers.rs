//! b2nd arrays of every dtype form, as python-blosc2 2.2 to 4.14 write them
//! (and a few structured ones packed by bloscpack 0.16)
//! (scripts/fixtures/writers/dtype.py, fixtures in tests/fixtures/writers/dtype):
//! each is presented as its writer reads it, byte for byte (`numpy.save` of
//! `blosc2.open(path)[...]`), under the name its writer's dtype allows
//! (`NAME.npy`, or the source name when the dtype has no `.npy` form); and
//! the `.npy` header of every stored dtype text is the one `numpy.save`
//! writes.

use crate::common;

use blosc_decode::dtype::Dtype;
use blosc_decode::npy::npy_header;
use bloscfs::fs::{Fs, FsOptions, ROOT_INO};
use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    common::fixture("writers/dtype")
}

struct Fixture {
    path: PathBuf,
    presented: String,
    npy: bool,
    len: u64,
    sha256: String,
    what: String,
}

/// Every fixture of every writer's manifest.
fn fixtures() -> Vec<Fixture> {
    let mut out = Vec::new();
    let mut writers: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("manifest.json").is_file())
        .collect();
    writers.sort();
    assert!(writers.len() >= 4, "{writers:?}");
    for w in writers {
        let text = std::fs::read_to_string(w.join("manifest.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for f in v["fixtures"].as_array().unwrap() {
            out.push(Fixture {
                path: dir().join(f["path"].as_str().unwrap()),
                presented: f["presented"].as_str().unwrap().into(),
                npy: f["npy"].as_bool().unwrap(),
                len: f["len"].as_u64().unwrap(),
                sha256: f["sha256"].as_str().unwrap().into(),
                what: format!("{} ({}, {})", f["path"], f["dtype"], f["why"]),
            });
        }
    }
    out
}

fn read_all(path: &Path) -> Vec<u8> {
    let c = blosc_decode::open_path(path).unwrap().unwrap();
    let mut buf = vec![0u8; c.len() as usize];
    assert_eq!(c.read_at(0, &mut buf).unwrap(), buf.len());
    buf
}

fn sha(b: &[u8]) -> String {
    format!("{:x}", Sha256::digest(b))
}

#[test]
fn every_array_is_presented_as_its_writer_reads_it() {
    let all = fixtures();
    let mut bad = Vec::new();
    for f in &all {
        let probe = blosc_decode::detect::probe_path(&f.path).unwrap().unwrap();
        let name = bloscfs::names::presented_name(f.path.file_name().unwrap(), probe.npy);
        let got = match std::panic::catch_unwind(|| read_all(&f.path)) {
            Ok(g) => g,
            Err(_) => {
                bad.push(format!("{}: does not open", f.what));
                continue;
            }
        };
        if probe.npy != f.npy || name != OsStr::new(&f.presented) {
            bad.push(format!("{}: presented as {name:?}", f.what));
        } else if got.len() as u64 != f.len || sha(&got) != f.sha256 || probe.len != f.len {
            bad.push(format!(
                "{}: {} bytes (probe {}), want {}{}",
                f.what,
                got.len(),
                probe.len,
                f.len,
                if f.npy && !got.starts_with(b"\x93NUMPY") {
                    " (no .npy header)"
                } else {
                    ""
                }
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {}:\n{}",
        bad.len(),
        all.len(),
        bad.join("\n")
    );
}

/// Read in odd pieces (header and data boundaries crossed anywhere).
#[test]
fn pieces_match_the_whole() {
    for f in fixtures().iter().filter(|f| f.len > 0) {
        let whole = read_all(&f.path);
        let c = blosc_decode::open_path(&f.path).unwrap().unwrap();
        let mut off = 0;
        for step in [1usize, 7, 63, 64, 65, 333].iter().cycle() {
            if off >= whole.len() {
                break;
            }
            let mut buf = vec![0u8; *step];
            let n = c.read_at(off as u64, &mut buf).unwrap();
            assert_eq!(&buf[..n], &whole[off..off + n], "{} at {off}", f.what);
            off += n;
        }
    }
}

/// The names a mount shows: `.npy` only for what holds a `.npy` header.
#[test]
fn names_in_a_mount() {
    let d = tempfile::tempdir().unwrap();
    let w = dir().join("b2-4.14.1");
    for n in ["bool-field", "out-of-order", "empty-3d", "typesize-u1"] {
        std::fs::copy(
            w.join(format!("{n}.b2nd")),
            d.path().join(format!("{n}.b2nd")),
        )
        .unwrap();
    }
    let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
    let mut names: Vec<String> = fs
        .readdir(ROOT_INO)
        .unwrap()
        .into_iter()
        .map(|e| e.name.to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "bool-field.npy",
            "empty-3d.npy",
            "out-of-order.b2nd",
            "typesize-u1.npy"
        ]
    );
    let a = fs.lookup(ROOT_INO, OsStr::new("empty-3d.npy")).unwrap();
    let (fh, _) = fs.open(a.ino, false).unwrap();
    let got = fs.read(fh, 0, 4096).unwrap();
    assert_eq!(got.len() as u64, a.size);
    assert!(got.starts_with(b"\x93NUMPY"));
    assert!(String::from_utf8_lossy(&got).contains("'shape': (3, 0, 4)"));
}

/// The header of every stored dtype text against `numpy.save`'s, for each
/// NumPy release the table was made with; where NumPy writes none that
/// loads back as the same dtype, the dtype is refused.
#[test]
fn descrs_and_headers_are_numpys() {
    let mut tables = 0;
    let mut bad = Vec::new();
    for e in std::fs::read_dir(dir()).unwrap() {
        let p = e.unwrap().path();
        if !p
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("descrs-")
        {
            continue;
        }
        tables += 1;
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        for row in v["dtypes"].as_array().unwrap() {
            let text = row["text"].as_str().unwrap();
            let at = format!("{} {text:?}", p.display());
            let parsed = Dtype::parse(text);
            let descr = parsed.as_ref().map_err(Clone::clone).and_then(Dtype::descr);
            if let Ok(d) = &parsed {
                if d.itemsize() != row["itemsize"].as_u64().unwrap() {
                    bad.push(format!("{at}: itemsize {}", d.itemsize()));
                }
            }
            match (&descr, row["header"].is_null()) {
                (Err(_), true) => {}
                (Ok(s), true) => bad.push(format!("{at}: descr {s} where numpy has none")),
                (Err(e), false) => bad.push(format!("{at}: refused: {e}")),
                (Ok(s), false) => {
                    let items = parsed.as_ref().map_or(0, Dtype::itemsize);
                    let h = npy_header(s, false, &[3], 3 * items);
                    if sha(&h) != row["header_sha256"].as_str().unwrap() {
                        bad.push(format!(
                            "{at}: header {:?}\n  numpy {}",
                            String::from_utf8_lossy(&h),
                            row["header"]
                        ));
                    }
                }
            }
        }
    }
    assert!(tables >= 2, "descr tables");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
