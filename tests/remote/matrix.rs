//! The reference fixture matrix read through each remote backend, byte
//! for byte against what the library reads locally (checked against the
//! reference library's SHA-256): whole files and windows with `bloscfs cat`,
//! and through one mount per backend (`.npy` views included).

use crate::common::*;
use crate::harness::*;
use crate::servers::*;
use std::os::unix::fs::FileExt;

/// A window of each fixture: from a third of the way in, up to 70,000
/// bytes (across chunk boundaries in the fixtures of several chunks).
fn window(len: usize) -> (usize, usize) {
    let off = len / 3;
    (off, (len - off).min(70_000))
}

/// `bloscfs cat` of every fixture, whole and a window; every fixture that
/// reads wrong is named in the failure.
fn check_cat(r: &Remote, fx: &[Fx]) {
    let mut bad = Vec::new();
    for f in fx {
        let want = reference_bytes(&f.rel);
        let rel = if f.kind == "blosc2-sframe" {
            r.dir_url(&f.rel)
        } else {
            f.rel.clone()
        };
        let o = r.cat(&rel, None, &[]);
        if !o.status.success() {
            bad.push(format!("{}: cat failed: {}", f.rel, o.stderr.trim()));
            continue;
        }
        if o.stdout != want {
            bad.push(format!(
                "{}: whole: {}",
                f.rel,
                first_diff(&want, &o.stdout)
            ));
            continue;
        }
        let (off, len) = window(want.len());
        let o = r.cat(&rel, Some((off as u64, len as u64)), &[]);
        if !o.status.success() || o.stdout != want[off..off + len] {
            bad.push(format!(
                "{}: window {off}+{len}: {} {}",
                f.rel,
                first_diff(&want[off..off + len], &o.stdout),
                o.stderr.trim()
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} fixtures read wrong with cat from {}:\n{}",
        bad.len(),
        fx.len(),
        r.base,
        bad.join("\n")
    );
}

/// Every fixture read through a mount of the tree: its size, its whole
/// content, and a window read with `pread`.
fn check_mount(r: &Remote, fx: &[Fx], extra: &[&str]) {
    if !fuse_available() {
        return;
    }
    let mut m = r.mount(extra);
    let mut bad = Vec::new();
    for f in fx {
        let want = reference_bytes(&f.rel);
        let p = m.path(&f.presented());
        match std::fs::metadata(&p) {
            Ok(md) if md.len() == want.len() as u64 => {}
            Ok(md) => {
                bad.push(format!(
                    "{}: size {} not {}",
                    f.presented(),
                    md.len(),
                    want.len()
                ));
                continue;
            }
            Err(e) => {
                bad.push(format!("{}: {e}", f.presented()));
                continue;
            }
        }
        match std::fs::read(&p) {
            Ok(got) if got == want => {}
            Ok(got) => bad.push(format!(
                "{}: whole: {}",
                f.presented(),
                first_diff(&want, &got)
            )),
            Err(e) => bad.push(format!("{}: reading: {e}", f.presented())),
        }
        let (off, len) = window(want.len());
        let mut buf = vec![0u8; len];
        let file = std::fs::File::open(&p).unwrap();
        match file.read_exact_at(&mut buf, off as u64) {
            Ok(()) if buf == want[off..off + len] => {}
            Ok(()) => bad.push(format!("{}: pread {off}+{len}: wrong bytes", f.presented())),
            Err(e) => bad.push(format!("{}: pread {off}+{len}: {e}", f.presented())),
        }
    }
    let log = m.log();
    m.unmount();
    assert!(
        bad.is_empty(),
        "{} of {} fixtures read wrong through a mount of {}:\n{}\nlog:\n{log}",
        bad.len(),
        fx.len(),
        r.base,
        bad.join("\n")
    );
}

#[test]
fn s3_serves_the_fixture_matrix() {
    let Some(moto) = Moto::start() else { return };
    let fx = matrix();
    let d = tempfile::tempdir().unwrap();
    stage(&fx, d.path());
    moto.mkbucket("fixtures");
    moto.upload("fixtures", "fx", d.path());
    let r = Remote::s3(&moto, "fixtures", "fx");
    check_cat(&r, &fx);
    check_mount(&r, &fx, &[]);
}

#[test]
fn http_serves_the_fixture_matrix() {
    let fx = matrix();
    let d = tempfile::tempdir().unwrap();
    stage(&fx, d.path());
    write_manifest(d.path());
    let Some(srv) = Faulty::start(d.path()) else {
        return;
    };
    let r = Remote::http(&srv);
    check_cat(&r, &fx);
    check_mount(&r, &fx, &[MANIFEST]);
    assert_eq!(srv.stats()["heads"], 0, "HEAD requests were sent");
}

/// Caterva2's fetch API serves stored datasets (contiguous frames and b2nd
/// arrays) with byte ranges; the rest of the matrix is not servable by it.
#[test]
fn caterva2_serves_the_frames_and_arrays_of_the_matrix() {
    let fx: Vec<Fx> = matrix()
        .into_iter()
        .filter(|f| f.kind == "blosc2-frame" || f.kind == "b2nd")
        .collect();
    assert!(fx.len() > 30, "{} frames and arrays", fx.len());
    let d = tempfile::tempdir().unwrap();
    stage(&fx, d.path());
    let Some(c2) = Caterva2::start(d.path()) else {
        return;
    };
    let r = Remote::caterva2(&c2);
    check_cat(&r, &fx);
    check_mount(&r, &fx, &[]);
}
