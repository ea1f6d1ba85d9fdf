//! HTTPS: servers with a certificate of a private authority (made by
//! `openssl` for the test), trusted with `-o ca_file=` and refused
//! without it, through `cat`, a mount, a daemon started from another
//! directory and `mount.fuse3` as fstab runs it.

use crate::common::*;
use crate::harness::*;
use crate::servers::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// One fixture of each of these kinds, staged in `dir`.
fn some_fixtures(dir: &Path) -> Vec<Fx> {
    let mut fx = Vec::new();
    for kind in ["blosc2-frame", "b2nd", "bloscpack", "blosc1-chunk"] {
        fx.push(matrix().into_iter().find(|f| f.kind == kind).unwrap());
    }
    stage(&fx, dir);
    fx
}

/// `cat` of each fixture reads exactly what the library reads locally.
fn cat_reads_exact(r: &Remote, fx: &[Fx]) {
    for f in fx {
        let o = r.cat(&f.rel, None, &[]);
        assert!(o.status.success(), "{}: {}", f.rel, o.stderr);
        let want = reference_bytes(&f.rel);
        assert!(
            o.stdout == want,
            "{}: {}",
            f.rel,
            first_diff(&want, &o.stdout)
        );
    }
}

/// Each fixture read through the mount at `mp` is what the library reads.
fn mount_reads_exact(mp: &Path, fx: &[Fx]) {
    for f in fx {
        let got = std::fs::read(mp.join(f.presented()))
            .unwrap_or_else(|e| panic!("{}: {e}", f.presented()));
        let want = reference_bytes(&f.rel);
        let diff = || first_diff(&want, &got);
        assert!(got == want, "{}: {}", f.presented(), diff());
    }
}

/// `cat` fails within the time of a request and its retries, saying why.
fn refused(r: &Remote, rel: &str, why: &str) {
    let o = r.cat(rel, None, &[]);
    assert!(
        !o.status.success(),
        "read over HTTPS without trusting the server"
    );
    assert!(o.took < Duration::from_secs(30), "took {:?}", o.took);
    assert!(o.stderr.contains(why), "no {why:?} in: {}", o.stderr);
}

#[test]
fn https_is_read_with_the_authority_named_by_ca_file_and_refused_without_it() {
    let Some(tls) = Tls::make() else { return };
    let d = tempfile::tempdir().unwrap();
    let fx = some_fixtures(d.path());
    write_manifest(d.path());
    let Some(srv) = Faulty::start_tls(d.path(), &tls.cert(), &tls.key()) else {
        return;
    };
    let plain = Remote::http(&srv).with("timeout=2,retries=1");
    assert!(plain.base.starts_with("https://"));
    let trusted = plain.with(&format!("ca_file={}", tls.ca().display()));
    cat_reads_exact(&trusted, &fx);

    // Not trusted: no authority, another one, or SSL_CERT_FILE naming
    // another one (the system's store is then not used at all).
    refused(&plain, &fx[0].rel, "certificate");
    refused(
        &plain.with(&format!("ca_file={}", tls.other_ca().display())),
        &fx[0].rel,
        "certificate",
    );
    let mut env_only = plain.clone();
    env_only
        .env
        .push(("SSL_CERT_FILE".into(), Some(tls.ca().display().to_string())));
    cat_reads_exact(&env_only, &fx[..1]);

    // A ca_file that is missing or holds no certificate is an error at once.
    let o = plain
        .with("ca_file=/nonexistent/ca.pem")
        .cat(&fx[0].rel, None, &[]);
    assert!(!o.status.success());
    assert!(
        o.stderr.contains("ca_file /nonexistent/ca.pem"),
        "{}",
        o.stderr
    );
    let o = plain
        .with(&format!("ca_file={}", tls.key().display()))
        .cat(&fx[0].rel, None, &[]);
    assert!(!o.status.success());
    assert!(o.stderr.contains("no PEM certificate"), "{}", o.stderr);

    // A mount reads the same, `.npy` views included.
    if !fuse_available() {
        return;
    }
    let mut m = trusted.mount(&[MANIFEST]);
    mount_reads_exact(&m.mp(), &fx);
    m.unmount();
}

/// A certificate the trusted authority issued for another name is refused.
#[test]
fn a_certificate_for_another_name_is_refused() {
    let Some(tls) = Tls::make() else { return };
    let d = tempfile::tempdir().unwrap();
    let fx = some_fixtures(d.path());
    let (cert, key) = tls.elsewhere();
    let Some(srv) = Faulty::start_tls(d.path(), &cert, &key) else {
        return;
    };
    let r = Remote::http(&srv)
        .with("timeout=2,retries=1")
        .with(&format!("ca_file={}", tls.ca().display()));
    refused(&r, &fx[0].rel, "certificate");
}

/// S3 over HTTPS (moto with the test authority's certificate): a daemon
/// started by `mount.fuse3` as an fstab line would, with `ca_file` and
/// `logfile` given relative to the directory it was started in (it serves
/// from `/`).
#[test]
fn s3_over_https_mounted_by_mount_fuse3_with_relative_files() {
    if !fuse_available() {
        return;
    }
    let Some(tls) = Tls::make() else { return };
    let Some(moto) = Moto::start_tls(&tls) else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let fx = some_fixtures(&d.path().join("data"));
    moto.mkbucket("tls");
    moto.upload("tls", "arrays", &d.path().join("data"));
    cat_reads_exact(
        &Remote::s3(&moto, "tls", "arrays").with(&format!("ca_file={}", tls.ca().display())),
        &fx,
    );

    let work = d.path().join("work");
    let mp = d.path().join("mnt");
    std::fs::create_dir(&work).unwrap();
    std::fs::create_dir(&mp).unwrap();
    std::fs::copy(tls.ca(), work.join("ca.pem")).unwrap();
    let path = path_with_bin(d.path());
    let opts = format!(
        "ro,_netdev,nofail,endpoint={},region=us-east-1,ca_file=ca.pem,logfile=bloscfs.log",
        moto.endpoint()
    );
    let o = Command::new("mount.fuse3")
        .arg("s3://tls/arrays")
        .arg(&mp)
        .args(["-t", "bloscfs", "-o", &opts])
        .envs(Moto::env())
        .env("PATH", path)
        .current_dir(&work)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "mount.fuse3: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = try_unmount(self.0);
        }
    }
    let _u = Unmount(&mp);
    assert!(is_mounted(&mp));
    mount_reads_exact(&mp, &fx);
    assert!(
        work.join("bloscfs.log").is_file(),
        "the log is not where -o logfile=bloscfs.log named it, from the daemon's start directory"
    );
    assert!(!Path::new("/bloscfs.log").exists(), "the log went to /");
}
