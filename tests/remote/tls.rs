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

/// `scripts/servers/mute.py`: takes connections and never answers them.
struct Mute(std::process::Child, u16);

impl Mute {
    fn start() -> Mute {
        use std::io::BufRead;
        let mut child = Command::new("python3")
            .arg(crate::common::root().join("scripts/servers/mute.py"))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().strip_prefix("listening on ").unwrap();
        Mute(child, port.parse().unwrap())
    }

    /// Connections made to it so far.
    fn connections(&self) -> u64 {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.1)).unwrap();
        s.write_all(b"count\n").unwrap();
        let mut a = String::new();
        s.read_to_string(&mut a).unwrap();
        a.trim().parse().unwrap()
    }
}

impl Drop for Mute {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An `https://` server that takes the connection and begins no TLS
/// handshake: one line saying so, after one connection (not retried),
/// for an HTTP source, an S3 endpoint and a Caterva2 server.
#[test]
fn a_server_that_begins_no_tls_handshake_is_named_in_one_line() {
    let m = Mute::start();
    let at = format!("127.0.0.1:{}", m.1);
    let keys = [("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "s")];
    let remote = |base: String, opts: &[String], env: &[(&str, &str)]| Remote {
        base,
        opts: opts.to_vec(),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect(),
    };
    let t = "timeout=4".to_string();
    let s3 = [
        t.clone(),
        format!("endpoint=https://{at}"),
        "region=us-east-1".into(),
    ];
    for r in [
        remote(format!("https://{at}"), std::slice::from_ref(&t), &[]),
        remote("s3://b".into(), &s3, &keys),
        remote(
            format!("caterva2s://{at}/@public"),
            std::slice::from_ref(&t),
            &[],
        ),
    ] {
        let before = m.connections();
        let o = r.cat("frame/x.b2frame", None, &[]);
        let err = o.stderr.trim_end();
        assert_eq!(o.status.code(), Some(1), "{}: {err}", r.base);
        assert_eq!(err.lines().count(), 1, "not one line: {err}");
        let want = format!("no TLS handshake from {at} within 2s: is it an https server?");
        assert!(err.contains(&want), "{}: {err}", r.base);
        assert_eq!(m.connections() - before, 1, "{}: connections", r.base);
    }
}
