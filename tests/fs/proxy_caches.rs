//! python-blosc2's caches of other arrays (`scripts/fixtures/gen_proxy.py`,
//! written by python-blosc2 3.0.0 and 4.14.1 into `tests/fixtures/proxy`):
//! `Proxy` caches of a local NDArray and SChunk and `RemoteArray` caches of
//! a local Zarr and b2nd array hold only the chunks (or blocks) read through
//! them, and keep zeros in place of the rest. Each chunk or block python-blosc2
//! counts fetched reads exactly what the proxy reads; every other one fails
//! (EIO through the tree) naming its chunk, never reads as zeros.

use crate::common;

use bloscfs::fs::{Fs, FsOptions, ROOT_INO};
use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_bloscfs");

/// Every manifest entry of `kind` (`None`: every cache), with its file's path.
fn entries(kind: Option<&str>) -> Vec<(PathBuf, serde_json::Value)> {
    let dir = common::fixture("proxy");
    let mut out = Vec::new();
    for w in ["3.0.0", "4.14.1"] {
        let text = std::fs::read_to_string(dir.join(w).join("manifest.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for f in v["fixtures"].as_array().unwrap() {
            let wanted = match kind {
                Some(k) => f["kind"] == k,
                None => f.get("chunks").is_some(),
            };
            if wanted {
                out.push((dir.join(f["path"].as_str().unwrap()), f.clone()));
            }
        }
    }
    out
}

fn sha(b: &[u8]) -> String {
    format!("{:x}", Sha256::digest(b))
}

fn cat(path: &Path, offset: u64, len: u64) -> std::process::Output {
    Command::new(BIN)
        .args(["cat", "--offset", &offset.to_string()])
        .args(["--length", &len.to_string()])
        .arg(path)
        .output()
        .unwrap()
}

/// How much further into `path`'s `.npy` its data starts than in the file
/// `numpy.save` writes, which the manifest's offsets and length count in.
fn shift(path: &Path) -> u64 {
    let c = blosc_decode::open_path(path).unwrap().unwrap();
    let mut head = vec![0u8; c.view().header_len() as usize];
    c.read_at(0, &mut head).unwrap();
    match common::numpy_header(&head, c.len()) {
        Some((ours, numpy)) => (ours - numpy.len()) as u64,
        None => 0,
    }
}

/// The chunks (or blocks) of the fixture at `path`: offset, length, fetched,
/// sha256, name.
fn units(path: &Path, f: &serde_json::Value) -> Vec<(u64, u64, bool, String, String)> {
    let shift = shift(path);
    let chunks = f["chunks"].as_array().unwrap();
    chunks
        .iter()
        .map(|u| {
            let name = match u["block"].as_u64() {
                Some(b) => format!("chunk {}: block {b}", u["chunk"]),
                None => format!("chunk {}", u["chunk"]),
            };
            (
                u["offset"].as_u64().unwrap() + shift,
                u["len"].as_u64().unwrap(),
                u["fetched"].as_bool().unwrap(),
                u["sha256"].as_str().unwrap().to_string(),
                name,
            )
        })
        .collect()
}

/// Chunks python-blosc2 counts fetched whole, and those it holds in part.
fn counted(f: &serde_json::Value) -> (usize, usize) {
    let mut per: std::collections::BTreeMap<u64, Vec<bool>> = Default::default();
    for u in f["chunks"].as_array().unwrap() {
        let fetched = u["fetched"].as_bool().unwrap();
        per.entry(u["chunk"].as_u64().unwrap())
            .or_default()
            .push(fetched);
    }
    let whole = per.values().filter(|v| v.iter().all(|&b| b)).count();
    let part = per.values().filter(|v| v.iter().any(|&b| b)).count() - whole;
    (whole, part)
}

#[test]
fn fetched_chunks_read_as_the_proxy_reads_them_the_rest_fail() {
    let all = entries(None);
    assert_eq!(all.len(), 10);
    let mut missing = 0;
    for (path, f) in &all {
        let probe = blosc_decode::detect::probe_path(path).unwrap().unwrap();
        let name = bloscfs::names::presented_name(path.file_name().unwrap(), probe.npy);
        assert_eq!(name, OsStr::new(f["presented"].as_str().unwrap()), "{f}");
        assert_eq!(probe.len, f["len"].as_u64().unwrap() + shift(path), "{f}");
        for (off, len, fetched, want, unit) in units(path, f) {
            let o = cat(path, off, len);
            let err = String::from_utf8_lossy(&o.stderr);
            if fetched {
                assert!(o.status.success(), "{path:?} {unit}: {err}");
                assert_eq!(sha(&o.stdout), want, "{path:?} {unit}");
            } else {
                missing += 1;
                assert!(!o.status.success(), "{path:?} {unit}: read");
                // (A chunk none of whose blocks was fetched fails as a chunk.)
                let chunk = unit.split(':').next().unwrap();
                assert!(
                    err.contains(&format!("{chunk}: ")) && err.contains("not fetched"),
                    "{path:?} {unit}: {err}"
                );
            }
        }
    }
    assert!(missing >= 20, "{missing}");
}

#[test]
fn info_counts_fetched_chunks_and_names_the_source() {
    for (path, f) in entries(None) {
        let o = Command::new(BIN).arg("info").arg(&path).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{path:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let (whole, part) = counted(&f);
        let kind = if f["kind"] == "remote-array" {
            "RemoteArray cache"
        } else {
            "proxy cache"
        };
        let n = f["nchunks"].as_u64().unwrap();
        let mut want = format!("cache:         {kind}, {whole} of {n} chunks fetched");
        let source = match f["path"].as_str().unwrap() {
            p if p.contains("ra-c2-") => "caterva2 http://127.0.0.1:18765/ @public/ds.b2nd",
            p if p.contains("ra-zarr") => "zarr /",
            p if p.contains("ra-blocks") => "fsspec /",
            _ => "-source.b2",
        };
        if part > 0 {
            want += &format!(" ({part} more in part)");
        }
        assert!(out.contains(&want), "{path:?}: {want:?} not in:\n{out}");
        let line = out.lines().find(|l| l.starts_with("cache of:      "));
        assert!(
            line.is_some_and(|l| l.contains(source)),
            "{path:?}: {source:?} not in:\n{out}"
        );
    }
}

/// Through the presented tree: a fetched chunk reads, an unfetched one (or
/// a read reaching into one) fails with EIO, and the file stays readable.
#[test]
fn unfetched_chunks_are_eio_in_the_tree() {
    let d = tempfile::tempdir().unwrap();
    let (path, f) = entries(Some("ndarray"))
        .into_iter()
        .find(|(p, _)| p.ends_with("4.14.1/nd-partial.b2nd"))
        .unwrap();
    std::fs::copy(&path, d.path().join("c.b2nd")).unwrap();
    let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
    let a = fs.lookup(ROOT_INO, OsStr::new("c.npy")).unwrap();
    assert_eq!(a.size, f["len"].as_u64().unwrap() + shift(&path));
    let (fh, _) = fs.open(a.ino, false).unwrap();
    let u = units(&path, &f);
    let (fetched, missing) = (&u[1], &u[3]);
    assert!(fetched.2 && !missing.2);
    // What python-blosc2 reads of the cache file there: zeros.
    assert_eq!(f["chunks"][3]["cache_reads_zeros"], true);
    assert_eq!(
        fs.read(fh, missing.0, 4096).map_err(|e| e.errno()),
        Err(libc::EIO)
    );
    // A read from the fetched chunk into the next, unfetched one.
    assert_eq!(
        fs.read(fh, u[2].0 + u[2].1 - 8, 16).map_err(|e| e.errno()),
        Err(libc::EIO)
    );
    // The fetched chunk of all zeros (chunk 2) reads zeros as it should.
    assert!(u[2].2);
    assert_eq!(fs.read(fh, u[2].0, 4096).unwrap(), vec![0u8; 4096]);
    let got = fs.read(fh, fetched.0, fetched.1 as u32).unwrap();
    assert_eq!(sha(&got), fetched.3);
}

/// A bitmap whose length does not fit the chunks is an error naming it:
/// the file still lists, reads fail with EIO, the others read.
#[test]
fn a_lying_bitmap_is_an_error() {
    let (path, f) = entries(Some("lying")).pop().unwrap();
    let o = cat(&path, 0, 16);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("proxy-fetched holds 3 bytes"), "{err}");
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(&path, d.path().join("lying.b2nd")).unwrap();
    let full = path.with_file_name("nd-full.b2nd");
    std::fs::copy(&full, d.path().join("full.b2nd")).unwrap();
    let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
    let a = fs.lookup(ROOT_INO, OsStr::new("lying.npy")).unwrap();
    let r = fs
        .open(a.ino, false)
        .and_then(|(fh, _)| fs.read(fh, 0, 4096));
    assert_eq!(r.map_err(|e| e.errno()), Err(libc::EIO), "{f}");
    let b = fs.lookup(ROOT_INO, OsStr::new("full.npy")).unwrap();
    let (fh, _) = fs.open(b.ino, false).unwrap();
    assert_eq!(fs.read(fh, 0, 4096).unwrap().len(), 4096);
}

/// A cache whose variable-length metalayers cannot be read cannot tell
/// fetched chunks from zeros: every read fails, none reads as data.
#[test]
fn a_cache_with_an_unreadable_trailer_reads_nothing() {
    let (path, f) = entries(Some("remote-array"))
        .into_iter()
        .find(|(p, _)| p.ends_with("ra-blocks-partial.b2nd"))
        .unwrap();
    let d = tempfile::tempdir().unwrap();
    let broken = d.path().join("broken.b2nd");
    let mut bytes = std::fs::read(&path).unwrap();
    let marker = bytes.len() - 23; // the trailer length's msgpack marker
    assert_eq!(bytes[marker], 0xce);
    bytes[marker] = 0;
    std::fs::write(&broken, bytes).unwrap();
    for (off, len, _, _, unit) in units(&path, &f) {
        let o = cat(&broken, off, len);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{unit}: read");
        assert!(err.contains("fetched chunks unknown"), "{unit}: {err}");
    }
}

/// A saved C2Array reference (python-blosc2 opens it as a `C2Array` on its
/// server; the frame itself reads zeros): passed through raw under its own
/// name, and `info` says where it points, exit 0.
#[test]
fn c2array_references_pass_through_raw() {
    let (path, f) = entries(Some("c2array")).pop().unwrap();
    assert_eq!(f["opens_as"], "C2Array");
    assert_eq!(f["raw_reads_zeros"], true);
    assert!(blosc_decode::detect::probe_path(&path).unwrap().is_none());
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(&path, d.path().join("ref.b2nd")).unwrap();
    let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
    assert_eq!(
        fs.lookup(ROOT_INO, OsStr::new("ref.npy"))
            .err()
            .map(|e| e.errno()),
        Some(libc::ENOENT)
    );
    let a = fs.lookup(ROOT_INO, OsStr::new("ref.b2nd")).unwrap();
    assert_eq!(a.size, f["len"].as_u64().unwrap());
    let (fh, _) = fs.open(a.ino, false).unwrap();
    assert_eq!(sha(&fs.read(fh, 0, 1 << 20).unwrap()), f["sha256"]);
    let o = Command::new(BIN).arg("info").arg(&path).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for want in [
        "python-blosc2: c2array (b2o metalayer)".to_string(),
        "data:          none of its own".to_string(),
        format!("urlbase:       {}", f["urlbase"].as_str().unwrap()),
        format!("path:          {}", f["ref_path"].as_str().unwrap()),
    ] {
        assert!(out.contains(&want), "{want:?} not in:\n{out}");
    }
}
