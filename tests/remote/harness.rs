//! How the remote tests reach a server: a [`Remote`] (the URL of a tree's
//! top, its `-o` options and environment), `bloscfs cat`/`info` run with a
//! time limit, a [`RemoteMount`], and the fixture matrix staged for upload.

use crate::common::*;
use crate::servers::*;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The `-o` option naming the manifest `write_manifest` writes.
pub const MANIFEST: &str = "manifest=manifest.txt";

/// A tree on a server as `bloscfs` is told to reach it.
#[derive(Clone, Debug)]
pub struct Remote {
    /// The URL of the tree's top: `s3://bucket/prefix`, `http://127.0.0.1:P`,
    /// `caterva2://127.0.0.1:P/@public`.
    pub base: String,
    /// What goes after `-o`, one option each.
    pub opts: Vec<String>,
    /// Environment added to (`Some`) or removed from (`None`) the command's.
    pub env: Vec<(String, Option<String>)>,
}

/// What a command did.
pub struct Out {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub took: Duration,
}

impl Out {
    /// `gets=N` as `--stats` prints it on stderr.
    pub fn gets(&self) -> u64 {
        self.stderr
            .split(|c: char| c.is_whitespace() || c == ',')
            .find_map(|w| w.strip_prefix("gets=").and_then(|n| n.parse().ok()))
            .unwrap_or_else(|| panic!("no gets=N on stderr: {}", self.stderr))
    }
}

impl Remote {
    pub fn s3(m: &Moto, bucket: &str, prefix: &str) -> Remote {
        Remote {
            base: format!("s3://{bucket}/{prefix}")
                .trim_end_matches('/')
                .to_string(),
            opts: vec![
                format!("endpoint={}", m.endpoint()),
                "region=us-east-1".into(),
            ],
            env: Moto::env()
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect(),
        }
    }

    /// The directory `faulty` serves (`.with(MANIFEST)` to list it by its
    /// manifest, else by the server's S3-style listing).
    pub fn http(f: &Faulty) -> Remote {
        Remote {
            base: f.base(),
            opts: vec![],
            env: vec![],
        }
    }

    /// The URL of the directory `rel` (a sparse frame): plain HTTP tells a
    /// directory by its trailing `/`.
    pub fn dir_url(&self, rel: &str) -> String {
        if self.base.starts_with("http") {
            format!("{}/", rel.trim_end_matches('/'))
        } else {
            rel.to_string()
        }
    }

    pub fn caterva2(c: &Caterva2) -> Remote {
        Remote {
            base: c.url("@public"),
            opts: vec![],
            env: vec![],
        }
    }

    /// The same with one more `-o` option.
    pub fn with(&self, opt: &str) -> Remote {
        let mut r = self.clone();
        r.opts.push(opt.to_string());
        r
    }

    /// The URL of `rel` under the tree's top.
    pub fn url(&self, rel: &str) -> String {
        format!("{}/{}", self.base.trim_end_matches('/'), rel)
    }

    /// `bloscfs` with this tree's environment.
    pub fn command(&self) -> Command {
        let mut c = Command::new(bin());
        for (k, v) in &self.env {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    }

    fn o(&self) -> Vec<String> {
        if self.opts.is_empty() {
            vec![]
        } else {
            vec!["-o".into(), self.opts.join(",")]
        }
    }

    /// `bloscfs cat -o OPTS [EXTRA] URL` (`--offset=`/`--length=` for a
    /// window), at most `limit` long.
    pub fn cat(&self, rel: &str, window: Option<(u64, u64)>, extra: &[&str]) -> Out {
        let mut c = self.command();
        c.arg("cat").args(self.o()).args(extra);
        if let Some((off, len)) = window {
            c.arg(format!("--offset={off}"))
                .arg(format!("--length={len}"));
        }
        c.arg(self.url(rel));
        run(c, Duration::from_secs(120))
    }

    /// `bloscfs info -o OPTS [EXTRA] URL`.
    pub fn info(&self, rel: &str, extra: &[&str]) -> Out {
        let mut c = self.command();
        c.arg("info").args(self.o()).args(extra).arg(self.url(rel));
        run(c, Duration::from_secs(60))
    }

    /// Mount the tree's top with extra `-o` options (an HTTP URL names a
    /// directory when it ends in `/`).
    pub fn mount(&self, extra: &[&str]) -> RemoteMount {
        let mut src = self.base.clone();
        if src.starts_with("http") && !src.ends_with('/') {
            src.push('/');
        }
        RemoteMount::start(self, &src, extra)
    }
}

/// Run `cmd` to its end, its output collected; past `limit` it is killed
/// and the test fails (a hang is a failure, not a wait).
pub fn run(mut cmd: Command, limit: Duration) -> Out {
    let what = format!("{cmd:?}");
    let t = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let so = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = so.read_to_end(&mut v);
        v
    });
    let se = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = se.read_to_end(&mut v);
        v
    });
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running after {limit:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Out {
        status,
        stdout: so.join().unwrap(),
        stderr: String::from_utf8_lossy(&se.join().unwrap()).into_owned(),
        took: t.elapsed(),
    }
}

/// A remote tree mounted by `bloscfs -f` in a child process, its log in a
/// file; unmounted (lazily if need be) and killed on drop.
pub struct RemoteMount {
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl RemoteMount {
    pub fn start(r: &Remote, source: &str, extra: &[&str]) -> RemoteMount {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("mnt")).unwrap();
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let mut opts = r.opts.clone();
        opts.extend(extra.iter().map(|s| s.to_string()));
        let mut c = r.command();
        c.arg("-f").arg(source).arg(dir.path().join("mnt"));
        if !opts.is_empty() {
            c.arg("-o").arg(opts.join(","));
        }
        let child = c
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut m = RemoteMount {
            dir,
            child: Some(child),
        };
        let t = Instant::now();
        while !mount_answers(&m.mp()) {
            if let Some(st) = m.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "bloscfs {source} exited ({st}) before mounting:\n{}",
                    m.log()
                );
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "{source} not mounted within 30 s:\n{}",
                m.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        m
    }

    pub fn mp(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.mp().join(rel)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("mounted").id()
    }

    /// Unmount, wait (bounded) for the daemon to exit, and check its log
    /// shows no panic.
    pub fn unmount(&mut self) {
        if let Err(why) = try_unmount(&self.mp()) {
            panic!("unmounting {}: {why}\n{}", self.mp().display(), self.log());
        }
        if let Some(mut c) = self.child.take() {
            let t = Instant::now();
            while c.try_wait().unwrap().is_none() {
                if t.elapsed() > Duration::from_secs(20) {
                    let _ = c.kill();
                    let _ = c.wait();
                    panic!("the daemon did not exit within 20 s of unmounting");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let log = self.log();
        assert!(!log.contains("panicked"), "{log}");
    }
}

impl Drop for RemoteMount {
    fn drop(&mut self) {
        if is_mounted(&self.mp()) {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(self.mp())
                .status();
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A fixture of the reference matrix (`tests/fixtures/manifest.json`).
#[derive(Clone, Debug)]
pub struct Fx {
    pub rel: String,
    /// Presented as a `.npy` array.
    pub npy: bool,
    pub kind: String,
}

impl Fx {
    /// Its path in a mount of the tree it was staged in.
    pub fn presented(&self) -> String {
        let (dir, name) = self.rel.rsplit_once('/').unwrap_or(("", &self.rel));
        let p = bloscfs::names::presented_name(std::ffi::OsStr::new(name), self.npy);
        let p = p.to_str().unwrap();
        if dir.is_empty() {
            p.to_string()
        } else {
            format!("{dir}/{p}")
        }
    }
}

/// The fixtures the local tests read whole (those expected to decode).
pub fn matrix() -> Vec<Fx> {
    let text = std::fs::read_to_string(fixtures().join("manifest.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["expect"] == "ok")
        .map(|f| {
            let rel = f["path"].as_str().unwrap().to_string();
            let c = blosc_decode::open_path(&fixture(&rel)).unwrap().unwrap();
            let npy = matches!(c.view(), blosc_decode::container::View::Npy { .. });
            Fx {
                rel,
                npy,
                kind: f["kind"].as_str().unwrap().to_string(),
            }
        })
        .collect()
}

/// Copy the fixtures `fx` into `dir` under their own relative paths.
pub fn stage(fx: &[Fx], dir: &Path) {
    for f in fx {
        let to = dir.join(&f.rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        copy(&fixture(&f.rel), &to);
    }
}

/// What `script` (Python, given a new directory) writes, by the project's
/// python, with a manifest; the file `npy` it saved there (what
/// zarr-python reads) taken out and returned as bloscfs presents it
/// (`as_bloscfs_shows`). `None` (skipped) without that python outside CI.
pub fn written_by_python(script: &str, npy: &str) -> Option<(tempfile::TempDir, Vec<u8>)> {
    let py = python()?;
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(py)
        .args(["-c", script])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = as_bloscfs_shows(&std::fs::read(dir.path().join(npy)).unwrap());
    std::fs::remove_file(dir.path().join(npy)).unwrap();
    write_manifest(dir.path());
    Some((dir, want))
}

/// `check` on a mount of `dir` served over plain HTTP (by its manifest),
/// given the server's GET count.
pub fn on_http(dir: &Path, check: impl Fn(&RemoteMount, &dyn Fn() -> u64)) {
    let Some(srv) = Faulty::start(dir) else {
        return;
    };
    let mut m = Remote::http(&srv).mount(&[MANIFEST]);
    check(&m, &|| srv.gets());
    m.unmount();
}

/// `check` on a mount of `dir` uploaded to a moto bucket `bucket`, given
/// the daemon's GET count.
pub fn on_s3(dir: &Path, bucket: &str, check: impl Fn(&RemoteMount, &dyn Fn() -> u64)) {
    let Some(moto) = Moto::start() else { return };
    moto.mkbucket(bucket);
    moto.upload(bucket, "t", dir);
    let mut m = Remote::s3(&moto, bucket, "t").mount(&["xattr"]);
    check(&m, &|| crate::counts::mount_gets(&m));
    m.unmount();
}

/// `dir/manifest.txt`: `SIZE PATH` for every file under `dir`.
pub fn write_manifest(dir: &Path) {
    fn walk(top: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(top, &p, out);
            } else {
                let rel = p.strip_prefix(top).unwrap().to_str().unwrap().to_string();
                if rel != "manifest.txt" {
                    out.push(format!("{} {rel}", p.metadata().unwrap().len()));
                }
            }
        }
    }
    let mut lines = Vec::new();
    walk(dir, dir, &mut lines);
    lines.sort();
    lines.push(String::new());
    std::fs::write(dir.join("manifest.txt"), lines.join("\n")).unwrap();
}

/// The frames of `scripts/servers/gen_remote_data.py` written into `dir`
/// by python-blosc2 (`big`, `big2`: 8 chunks of 2 MiB, `.b2frame` and
/// `.raw`); `None` (skipped) without that python outside CI.
pub fn big_frames(dir: &Path) -> Option<()> {
    let py = python()?;
    let o = Command::new(py)
        .arg(root().join("scripts/servers/gen_remote_data.py"))
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "gen_remote_data.py: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(())
}

/// Where `got` first differs from `want`, for a failure message.
pub fn first_diff(want: &[u8], got: &[u8]) -> String {
    match want.iter().zip(got).position(|(a, b)| a != b) {
        Some(i) => format!("first difference at byte {i} (of {})", want.len()),
        None => format!("lengths {} (wanted) and {} (got)", want.len(), got.len()),
    }
}

/// A process's peak resident memory (`VmHWM`), in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb = s
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM in /proc/PID/status");
    kb << 10
}
