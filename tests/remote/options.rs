//! Options that guard what a remote source reaches and shows: files named
//! by options are read only if regular and small (never blocking on a
//! FIFO), a password file must be private, an unknown option never echoes
//! its value, and `uid=`, `gid=`, `file_mode=`, `dir_mode=` set what a
//! remote mount shows (refused for a local source).

use crate::common::*;
use crate::harness::*;
use crate::servers::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const REL: &str = "frame/blocks-lz4.b2frame";
const SPARSE: &str = "frame/blosclz-delta-ts8-s.b2frame";

/// A FIFO at `path`.
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// `cat` through `r` with `-o OPT=FILE` failed at once, saying `why`
/// about `OPT FILE`, and without a request to the server `srv`.
fn refused(r: &Remote, srv: &Faulty, opt: &str, file: &Path, why: &str) {
    let o = r
        .with(&format!("{opt}={}", file.display()))
        .cat(REL, None, &[]);
    let what = format!("{opt} {}", file.display());
    assert!(!o.status.success(), "{what}: accepted");
    assert!(
        o.stderr.contains(&what) && o.stderr.contains(why),
        "{what}: {why:?} not in {}",
        o.stderr
    );
    let got = srv.received();
    assert!(got.is_empty(), "{what}: the server was sent {got:#?}");
}

/// Caterva2 at `srv`, logging in as `u` (a password file to add).
fn caterva2(srv: &Faulty) -> Remote {
    Remote {
        base: format!("caterva2://127.0.0.1:{}/@public", srv.0.port),
        opts: vec!["user=u".into()],
        env: vec![],
    }
}

const FIFO: &str = "a FIFO, not a regular file";
const DEVICE: &str = "a character device, not a regular file";

#[test]
fn files_named_by_options_are_regular_and_bounded_never_blocking() {
    let d = tempfile::tempdir().unwrap();
    let Some(srv) = Faulty::start_recording(d.path()) else {
        return;
    };
    let fifo = d.path().join("fifo");
    mkfifo(&fifo);
    let big = d.path().join("big.pem");
    std::fs::write(&big, vec![b'#'; (4 << 20) + 1]).unwrap();
    let zero = Path::new("/dev/zero");
    let http = Remote::http(&srv);
    for (file, why) in [
        (fifo.as_path(), FIFO),
        (d.path(), "a directory, not a regular file"),
        (big.as_path(), "more than 4194304 bytes"),
        (zero, DEVICE),
    ] {
        refused(&http, &srv, "ca_file", file, why);
    }
    for (file, why) in [(fifo.as_path(), FIFO), (zero, DEVICE)] {
        refused(&caterva2(&srv), &srv, "password_file", file, why);
    }
}

#[test]
fn a_password_file_others_may_read_is_refused_before_any_request() {
    let d = tempfile::tempdir().unwrap();
    let Some(srv) = Faulty::start_recording(d.path()) else {
        return;
    };
    let pw = d.path().join("pw");
    std::fs::write(&pw, "secret-password\n").unwrap();
    for mode in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(mode)).unwrap();
        let why = format!("is readable by its group or others (mode {mode:04o}): chmod 600 it");
        refused(&caterva2(&srv), &srv, "password_file", &pw, &why);
    }
}

/// `bloscfs ARGS` (a parse error expected: no server, no mount).
fn bloscfs(args: &[&str]) -> Out {
    let mut c = Command::new(bin());
    c.args(args);
    run(c, Duration::from_secs(60))
}

#[test]
fn an_unknown_option_never_echoes_its_value() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    let url = "http://127.0.0.1:1/x.b2frame";
    for args in [
        vec!["-o", "password=S3CRET-value", dir, dir],
        vec!["-o", "ro,password=S3CRET-value", "s3://bucket", dir],
        vec!["-o", "password=ab,S3CRET-value", "s3://bucket", dir],
        vec!["cat", "-o", "password=S3CRET-value", url],
        vec!["info", "-o", "token=S3CRET-value", url],
        vec!["--token=S3CRET-value", dir, dir],
        vec!["cat", "--password=S3CRET-value", url],
        vec!["info", "--password=S3CRET-value", url],
    ] {
        let o = bloscfs(&args);
        assert!(!o.status.success(), "{args:?}: accepted");
        let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), o.stderr);
        assert!(!all.contains("S3CRET"), "{args:?}: {all}");
        assert!(all.contains("unknown option"), "{args:?}: {all}");
    }
    let o = bloscfs(&["-o", "password=S3CRET-value", dir, dir]);
    assert!(
        o.stderr.contains("unknown option 'password'"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_local_source_refuses_remote_permissions() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    for opt in ["uid=1234", "gid=1234", "file_mode=0440", "dir_mode=0550"] {
        let o = bloscfs(&["-o", opt, dir, dir]);
        assert_eq!(o.status.code(), Some(2), "{opt}: {}", o.stderr);
        assert!(
            o.stderr.contains("for remote sources"),
            "{opt}: {}",
            o.stderr
        );
    }
    for opt in ["file_mode=0644", "dir_mode=0755"] {
        let o = bloscfs(&["-o", opt, "s3://bucket", dir]);
        assert!(o.stderr.contains("write bits"), "{opt}: {}", o.stderr);
    }
}

/// uid, gid and mode (without the type) of an entry.
type Owner = (u32, u32, u32);

/// The [`Owner`] of every directory and of every file under the mount
/// point `mp`, the top included.
fn owners(mp: &Path) -> (Vec<Owner>, Vec<Owner>) {
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    let mut todo = vec![mp.to_path_buf()];
    while let Some(p) = todo.pop() {
        let md = std::fs::metadata(&p).unwrap();
        let got = (md.uid(), md.gid(), md.mode() & 0o7777);
        if md.is_dir() {
            dirs.push(got);
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else {
            files.push(got);
        }
    }
    (dirs, files)
}

#[test]
fn remote_permissions_follow_uid_gid_file_mode_dir_mode() {
    if !fuse_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("frame")).unwrap();
    // A frame, and a sparse frame (a directory shown as a file).
    for rel in [REL, SPARSE] {
        copy(&fixture(rel), &d.path().join(rel));
    }
    let Some(srv) = Faulty::start(d.path()) else {
        return;
    };
    let r = Remote::http(&srv);
    // SAFETY: getuid and getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut m = r.mount(&[]);
    let (dirs, files) = owners(&m.mp());
    assert_eq!((dirs.len(), files.len()), (2, 2));
    assert!(dirs.iter().all(|&o| o == (uid, gid, 0o555)), "{dirs:?}");
    assert!(files.iter().all(|&o| o == (uid, gid, 0o444)), "{files:?}");
    m.unmount();
    let opts = ["uid=1234", "gid=2345", "file_mode=0440", "dir_mode=0550"];
    let mut m = r.mount(&opts);
    let (dirs, files) = owners(&m.mp());
    assert_eq!((dirs.len(), files.len()), (2, 2));
    assert!(dirs.iter().all(|&o| o == (1234, 2345, 0o550)), "{dirs:?}");
    assert!(files.iter().all(|&o| o == (1234, 2345, 0o440)), "{files:?}");
    m.unmount();
}
