//! Real servers on 127.0.0.1 for the remote-source tests, started by the
//! test itself and killed when dropped: moto (the S3 API), caterva2 and the
//! fault-injecting HTTP server `scripts/servers/faulty.py` (moto and
//! faulty.py also over HTTPS, with certificates [`Tls`] makes). moto and
//! caterva2 come from `.venv-servers` (`scripts/setup.sh`). A missing server
//! fails the test when `CI` is set; elsewhere `start` returns `None` after
//! saying what is skipped.
#![allow(dead_code)]

use crate::common::{copy, root};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The servers' venv: `$BLOSCFS_SERVERS_VENV` or `.venv-servers`.
pub fn servers_venv() -> PathBuf {
    std::env::var_os("BLOSCFS_SERVERS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv-servers"))
}

/// `bin/NAME` of the servers' venv if it is there; else a failure in CI,
/// a skip (with a message) elsewhere.
fn venv_tool(name: &str) -> Option<PathBuf> {
    let p = servers_venv().join("bin").join(name);
    if p.is_file() {
        return Some(p);
    }
    missing(&format!("{} is missing", p.display()));
    None
}

fn missing(what: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{what} and CI is set: the remote tests must run (scripts/setup.sh installs the servers)");
    }
    eprintln!("SKIPPING a remote test: {what} (scripts/setup.sh installs it; set CI=1 to make this a failure)");
}

/// A port free on 127.0.0.1 at the time of asking.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What [`http`] got: the status, the header block, the body.
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Answer {
    /// The value of header `name` (case-insensitive), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// One HTTP/1.1 request to 127.0.0.1:`port` with extra header lines
/// (`"Range: bytes=0-9"`), the connection closed after it. A body cut
/// short is returned as it came.
pub fn http(port: u16, method: &str, path: &str, headers: &[&str]) -> std::io::Result<Answer> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
    for h in headers {
        req += &format!("{h}\r\n");
    }
    req += "Content-Length: 0\r\nConnection: close\r\n\r\n";
    s.write_all(req.as_bytes())?;
    let mut all = Vec::new();
    s.read_to_end(&mut all)?;
    let head_end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of headers"))?;
    let head = String::from_utf8_lossy(&all[..head_end]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status line"))?;
    Ok(Answer {
        status,
        head,
        body: all[head_end + 4..].to_vec(),
    })
}

/// A server process, its log in a temporary directory; killed on drop.
pub struct Server {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    what: &'static str,
    /// `http` or `https`.
    scheme: &'static str,
}

impl Server {
    fn spawn(what: &'static str, mut cmd: Command, port: u16, dir: tempfile::TempDir) -> Server {
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {what}: {e}"));
        Server {
            child,
            port,
            dir,
            what,
            scheme: "http",
        }
    }

    /// The server's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// Wait (at most 60 s, else fail) until `GET path` answers with any status.
    fn wait_ready(&mut self, path: &str) {
        self.wait_until(|port| http(port, "GET", path, &[]).is_ok());
    }

    /// Wait (at most 60 s, else fail) until the port takes connections
    /// (an HTTPS server: a plain request would not be answered).
    fn wait_listening(&mut self) {
        self.wait_until(|port| TcpStream::connect(("127.0.0.1", port)).is_ok());
    }

    fn wait_until(&mut self, ready: impl Fn(u16) -> bool) {
        let t = Instant::now();
        while !ready(self.port) {
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!(
                    "{} exited ({st}) before serving:\n{}",
                    self.what,
                    self.log()
                );
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "{} did not answer on port {} within 60 s:\n{}",
                self.what,
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The base URL, `http://127.0.0.1:PORT` (`https://` over TLS).
    pub fn base(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run a command to completion; panic with its output if it fails.
/// Run `cmd`, which must succeed: its standard output.
fn run(cmd: &mut Command, what: &str) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        o.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// moto's S3 API server.
pub struct Moto(pub Server);

impl Moto {
    pub fn start() -> Option<Moto> {
        let exe = venv_tool("moto_server")?;
        let port = free_port();
        let mut cmd = Command::new(exe);
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
        let mut s = Server::spawn("moto_server", cmd, port, tempfile::tempdir().unwrap());
        s.wait_ready("/");
        Some(Moto(s))
    }

    /// The same over HTTPS only, with the certificate `tls` issued for
    /// 127.0.0.1 (the uploads trust its authority).
    pub fn start_tls(tls: &Tls) -> Option<Moto> {
        let exe = venv_tool("moto_server")?;
        let port = free_port();
        let mut cmd = Command::new(exe);
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .arg("-c")
            .arg(tls.cert())
            .arg("-k")
            .arg(tls.key());
        let mut s = Server::spawn("moto_server", cmd, port, tempfile::tempdir().unwrap());
        s.scheme = "https";
        s.wait_listening();
        std::fs::copy(tls.ca(), s.dir.path().join("ca.pem")).unwrap();
        Some(Moto(s))
    }

    /// The `-o endpoint=` value.
    pub fn endpoint(&self) -> String {
        self.0.base()
    }

    /// The AWS environment for a signed client of this server (moto takes
    /// any key).
    pub fn env() -> [(&'static str, &'static str); 3] {
        [
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("AWS_REGION", "us-east-1"),
        ]
    }

    fn s3(&self, args: &[&str]) -> String {
        let py = servers_venv().join("bin/python");
        let mut cmd = Command::new(py);
        cmd.arg(root().join("scripts/servers/s3_upload.py"))
            .arg(self.endpoint())
            .args(args)
            .envs(Moto::env());
        let ca = self.0.dir.path().join("ca.pem");
        if ca.exists() {
            cmd.env("AWS_CA_BUNDLE", ca);
        }
        run(&mut cmd, &format!("s3_upload.py {}", args.join(" ")))
    }

    pub fn mkbucket(&self, bucket: &str) {
        self.s3(&["mkbucket", bucket]);
    }

    /// An IAM user allowed every S3 action, and an access key of it: (key
    /// id, secret).
    pub fn iam_key(&self, user: &str) -> (String, String) {
        let out = self.s3(&["iamkey", user]);
        let (id, secret) = out.trim().split_once(' ').expect("KEY_ID SECRET");
        (id.to_string(), secret.to_string())
    }

    /// From now on moto checks every request's signature against the access
    /// keys it made ([`Moto::iam_key`]).
    pub fn check_signatures(&self) {
        self.s3(&["checksigs"]);
    }

    /// Every file under `dir` as `prefix/relpath` ("" for the bucket's top).
    pub fn upload(&self, bucket: &str, prefix: &str, dir: &Path) {
        self.s3(&["upload", bucket, prefix, dir.to_str().unwrap()]);
    }

    /// One object, replacing whatever `key` held.
    pub fn put(&self, bucket: &str, key: &str, file: &Path) {
        self.s3(&["put", bucket, key, file.to_str().unwrap()]);
    }

    /// One object whose key is given with Python escapes (`\\x00`).
    pub fn putx(&self, bucket: &str, key: &str, file: &Path) {
        self.s3(&["putx", bucket, key, file.to_str().unwrap()]);
    }

    /// A bucket policy letting anyone list the bucket and read its objects.
    pub fn make_public(&self, bucket: &str) {
        self.s3(&["public", bucket]);
    }
}

/// A caterva2 server whose `@public` root holds a copy of a directory.
pub struct Caterva2(pub Server);

impl Caterva2 {
    /// Serve a copy of the tree `public` as the root `@public`.
    pub fn start(public: &Path) -> Option<Caterva2> {
        let exe = venv_tool("cat2-server")?;
        let port = free_port();
        let state = tempfile::tempdir().unwrap();
        copy(public, &state.path().join("public"));
        let mut cmd = Command::new(exe);
        cmd.arg("--statedir")
            .arg(state.path())
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env("CATERVA2_SECRET", "bloscfs-test-secret")
            .current_dir(state.path());
        let mut s = Server::spawn("cat2-server", cmd, port, state);
        s.wait_ready("/api/roots");
        Some(Caterva2(s))
    }

    /// The URL of a path under a root: `caterva2://127.0.0.1:PORT/ROOT/PATH`.
    pub fn url(&self, path: &str) -> String {
        format!("caterva2://127.0.0.1:{}/{path}", self.0.port)
    }

    /// The directory served as `@public`.
    pub fn public(&self) -> PathBuf {
        self.0.dir.path().join("public")
    }

    /// A user of the server (`cat2-admin adduser`), for `-o user=`.
    pub fn add_user(&self, name: &str, password: &str) {
        let exe = servers_venv().join("bin/cat2-admin");
        let mut cmd = Command::new(exe);
        cmd.arg("--statedir")
            .arg(self.0.dir.path())
            .args(["adduser", name, password])
            .env("CATERVA2_SECRET", "bloscfs-test-secret")
            .current_dir(self.0.dir.path());
        run(&mut cmd, "cat2-admin adduser");
    }
}

/// The fault-injecting HTTP server `scripts/servers/faulty.py` over a
/// directory (see its docstring for the faults).
pub struct Faulty(pub Server);

impl Faulty {
    pub fn start(dir: &Path) -> Option<Faulty> {
        Faulty::spawn(dir, &[])
    }

    /// The same over HTTPS only, with the certificate and key `cert`, `key`
    /// (the fault and statistics requests too).
    pub fn start_tls(dir: &Path, cert: &Path, key: &Path) -> Option<Faulty> {
        let mut f = Faulty::spawn(dir, &["--tls".as_ref(), cert.as_os_str(), key.as_os_str()])?;
        f.0.scheme = "https";
        Some(f)
    }

    /// The same, keeping every request it is sent (`--record`): see
    /// [`Faulty::received`].
    pub fn start_recording(dir: &Path) -> Option<Faulty> {
        Faulty::spawn(dir, &["--record".as_ref()])
    }

    /// Every request a recording server was sent since its last reset
    /// (`{"method", "path", "headers", "body"}`), but those of the test's
    /// own `/_...` calls.
    pub fn received(&self) -> Vec<serde_json::Value> {
        self.stats()["log"].as_array().cloned().unwrap_or_default()
    }

    fn spawn(dir: &Path, args: &[&std::ffi::OsStr]) -> Option<Faulty> {
        let py = if Command::new("python3").arg("-V").output().is_ok() {
            "python3"
        } else {
            missing("python3 is missing");
            return None;
        };
        let mut child = Command::new(py)
            .arg(root().join("scripts/servers/faulty.py"))
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("faulty.py said {line:?}"));
        Some(Faulty(Server {
            child,
            port,
            dir: tempfile::tempdir().unwrap(),
            what: "faulty.py",
            scheme: "http",
        }))
    }

    pub fn base(&self) -> String {
        self.0.base()
    }

    /// `POST /_fault?mode=MODE` (`MODE` may go on with `&count=N`);
    /// `"none"` clears it.
    pub fn set_fault(&self, mode: &str) {
        let a = http(self.0.port, "POST", &format!("/_fault?mode={mode}"), &[]).unwrap();
        assert_eq!(a.status, 204, "setting fault {mode}");
    }

    /// Clear the fault and the counters.
    pub fn reset(&self) {
        let a = http(self.0.port, "POST", "/_reset", &[]).unwrap();
        assert_eq!(a.status, 204);
    }

    /// `GET /_stats`: {"gets", "heads", "paths", "ranges", ...}.
    pub fn stats(&self) -> serde_json::Value {
        let a = http(self.0.port, "GET", "/_stats", &[]).unwrap();
        assert_eq!(a.status, 200);
        serde_json::from_slice(&a.body).unwrap()
    }

    /// GETs of files served so far (since the last reset).
    pub fn gets(&self) -> u64 {
        self.stats()["gets"].as_u64().unwrap()
    }

    /// Requests fault `name` (`"5xx"`, `"stall"`, ...) applied to so far.
    pub fn faulted(&self, name: &str) -> u64 {
        self.stats()["faulted"][name].as_u64().unwrap_or(0)
    }

    /// `GET path` with extra header lines.
    pub fn get(&self, path: &str, headers: &[&str]) -> Answer {
        http(self.0.port, "GET", path, headers).unwrap()
    }
}

/// Certificates made by `openssl` for the HTTPS tests, in a temporary
/// directory: an authority (`ca.pem`) and the server certificate it issued
/// for 127.0.0.1 and localhost (`server.pem`, `server.key`); another
/// authority that issued nothing here (`other-ca.pem`); and a certificate
/// the first authority issued for another name, `example.org`
/// (`elsewhere.pem`, `elsewhere.key`).
pub struct Tls(pub tempfile::TempDir);

impl Tls {
    pub fn make() -> Option<Tls> {
        if Command::new("openssl").arg("version").output().is_err() {
            missing("openssl is missing");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        // Arguments split at spaces (none has one).
        let openssl = |args: String| {
            let mut c = Command::new("openssl");
            c.args(args.split_whitespace()).current_dir(dir.path());
            run(&mut c, &format!("openssl {args}"));
        };
        let key = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
        for ca in ["ca", "other-ca"] {
            openssl(format!(
                "req -x509 {key} -days 2 -subj /CN=bloscfs-test-{ca} \
                 -addext basicConstraints=critical,CA:TRUE \
                 -addext keyUsage=critical,keyCertSign,cRLSign -keyout {ca}.key -out {ca}.pem"
            ));
        }
        for (name, san) in [
            ("server", "IP:127.0.0.1,DNS:localhost"),
            ("elsewhere", "DNS:example.org"),
        ] {
            openssl(format!(
                "req {key} -subj /CN={name} -keyout {name}.key -out {name}.csr"
            ));
            let ext = format!(
                "subjectAltName={san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
            );
            std::fs::write(dir.path().join(format!("{name}.ext")), ext).unwrap();
            openssl(format!(
                "x509 -req -in {name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
                 -extfile {name}.ext -out {name}.pem"
            ));
        }
        Some(Tls(dir))
    }

    pub fn ca(&self) -> PathBuf {
        self.0.path().join("ca.pem")
    }

    pub fn other_ca(&self) -> PathBuf {
        self.0.path().join("other-ca.pem")
    }

    pub fn cert(&self) -> PathBuf {
        self.0.path().join("server.pem")
    }

    pub fn key(&self) -> PathBuf {
        self.0.path().join("server.key")
    }

    /// A certificate of the trusted authority for `example.org`, and its key.
    pub fn elsewhere(&self) -> (PathBuf, PathBuf) {
        let d = self.0.path();
        (d.join("elsewhere.pem"), d.join("elsewhere.key"))
    }
}
