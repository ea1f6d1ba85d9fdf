//! Readers killed while their request waits for an answer the fault server
//! holds: the kernel sends the daemon an INTERRUPT, the daemon answers the
//! request `EINTR` at once, and the reader is released without the answer
//! (without that the kernel waits for the answer, up to the mount's
//! `timeout`, with the reader unkillable). The daemon serves on, and the
//! same file reads whole once the answers are released.

use crate::common::*;
use crate::harness::*;
use crate::listings::{post, Release};
use crate::servers::*;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A frame of 4 MiB of random bytes in 256 KiB chunks, written by
/// python-blosc2, and what python-blosc2 decompresses it to.
const WRITE_FRAME: &str = r#"
import sys, blosc2, numpy as np
data = np.random.default_rng(29).integers(0, 256, 4 << 20, dtype=np.uint8).tobytes()
blosc2.SChunk(chunksize=256 << 10, data=data, urlpath=sys.argv[1], mode="w",
              cparams={"typesize": 1, "clevel": 1})
with open(sys.argv[2], "wb") as f:
    f.write(blosc2.open(sys.argv[1])[:])
"#;

/// Opens the file, says so, waits for a line on stdin, then reads 64 KiB
/// from the middle (a chunk not fetched at open). With `O_DIRECT`: the
/// kernel waits for the READ's answer itself (a read through the page
/// cache waits for the page, killably, while the READ goes on without it).
const READER: &str = r#"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
print("open", flush=True)
sys.stdin.readline()
os.pread(fd, 64 << 10, 2 << 20)
print("read", flush=True)
"#;

/// The fault server over `big.b2frame` and `healthy.txt`, a mount of it
/// whose requests never time out while held, the frame's presented name
/// and its bytes as python-blosc2 reads them.
struct Held {
    f: Faulty,
    m: RemoteMount,
    big: String,
    want: Vec<u8>,
    _dir: tempfile::TempDir,
}

fn held_frame(opts: &[&str]) -> Option<Held> {
    let py = python()?;
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let want = d.path().join("want");
    let st = Command::new(py)
        .args(["-c", WRITE_FRAME])
        .arg(src.join("big.b2frame"))
        .arg(&want)
        .status()
        .unwrap();
    assert!(st.success(), "python-blosc2 writing the frame");
    std::fs::write(src.join("healthy.txt"), b"healthy\n").unwrap();
    let f = Faulty::start(&src)?;
    let m = Remote::http(&f).mount(&[&["timeout=600", "debug"], opts].concat());
    let big = bloscfs::names::presented_name("big.b2frame".as_ref(), false);
    Some(Held {
        f,
        m,
        big: big.to_str().unwrap().to_string(),
        want: std::fs::read(want).unwrap(),
        _dir: d,
    })
}

impl Held {
    fn held(&self) -> u64 {
        self.f.stats()["held"].as_u64().unwrap_or(0)
    }

    /// Hold every GET of the frame from now on.
    fn hold(&self) {
        post(&self.f, "/_hold?prefix=/big");
    }

    /// After the answers are released: the daemon still serves the frame
    /// whole and another file, and logged no panic.
    fn serves_on(&mut self) {
        assert_eq!(
            std::fs::read(self.m.path("healthy.txt")).unwrap(),
            b"healthy\n"
        );
        let got = std::fs::read(self.m.path(&self.big)).unwrap();
        assert!(
            got == self.want,
            "the frame read after the interrupt differs"
        );
        self.m.unmount();
    }
}

/// Send `sig` to `child`, then wait for it to end (reaped). The bound is
/// a failure, not a measurement: without interrupts the child waits for
/// the held answer for the mount's 600 s timeout.
fn kill_and_reap(child: &mut Child, sig: i32, m: &RemoteMount) -> std::process::ExitStatus {
    // SAFETY: a signal to our own child process, not yet reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let t = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the reader still waits 60 s after signal {sig}\nwhere they wait:\n{}{}\n{}",
            waits(child.id()),
            waits(m.pid()),
            m.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `cmd` with SIGINT's default action in the child: a test run in the
/// background of a shell without job control inherits SIGINT ignored, and
/// so would the reader the test interrupts (it then waited for ever).
fn with_default_sigint(mut cmd: Command) -> Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe `signal` between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd
}

/// Where each thread of process `pid` waits: its name, state, signals
/// pending, blocked and ignored, and kernel stack (what a failure needs to
/// be explained).
fn waits(pid: u32) -> String {
    let task = format!("/proc/{pid}/task");
    let mut out = String::new();
    for t in std::fs::read_dir(&task).into_iter().flatten().flatten() {
        let d = t.path();
        let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap_or_default();
        let status = read("status");
        let keep: Vec<&str> = status
            .lines()
            .filter(|l| {
                [
                    "Name:", "State:", "SigPnd:", "ShdPnd:", "SigBlk:", "SigIgn:",
                ]
                .iter()
                .any(|k| l.starts_with(k))
            })
            .collect();
        out += &format!(
            "{pid}/{}: {} wchan {}\n{}",
            t.file_name().to_string_lossy(),
            keep.join(" "),
            read("wchan"),
            read("stack")
        );
    }
    out
}

fn signalled(st: std::process::ExitStatus, sig: i32) -> bool {
    use std::os::unix::process::ExitStatusExt;
    st.signal() == Some(sig)
}

/// A read the server holds (the file opened before the hold), its reader
/// killed: released at once; the daemon serves on. Through `/dev/fuse`,
/// and through the io_uring queues (`-o uring`; where the kernel offers
/// them, as in CI): the answer then commits the entry of a thread still
/// waiting on the server, another thread takes the entry over, and the
/// daemon still ends when unmounted.
#[test]
fn a_killed_reader_of_a_held_read_is_released() {
    killed_reader_released(&[]);
}

#[test]
fn a_killed_reader_of_a_held_read_is_released_through_io_uring() {
    killed_reader_released(&["uring"]);
}

fn killed_reader_released(opts: &[&str]) {
    if !fuse_available() {
        return;
    }
    let Some(mut h) = held_frame(opts) else {
        return;
    };
    let release = Release(&h.f);
    let mut reader = Command::new(python().unwrap())
        .args(["-c", READER])
        .arg(h.m.path(&h.big))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(reader.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "open\n", "{}", h.m.log());
    let before = h.held();
    h.hold();
    reader.stdin.take().unwrap().write_all(b"\n").unwrap();
    wait_for(|| h.held() > before, "the read to reach the server");
    let st = kill_and_reap(&mut reader, libc::SIGKILL, &h.m);
    assert!(signalled(st, libc::SIGKILL), "{st:?}");
    assert!(h.held() > before, "released before the reader ended");
    drop(release);
    let log = h.m.log();
    assert!(log.contains("Answered"), "{log}");
    if opts.contains(&"uring") {
        // The held READ came through a queue (debug logs each request's
        // thread).
        assert!(
            log.contains("READ") && log.contains("thread=fuser-q"),
            "{log}"
        );
    }
    h.serves_on();
}

/// `cat` of a frame whose open the server holds (the frame looked up
/// before the hold), interrupted by SIGINT: released at once; the daemon
/// serves on, the file handle its open got given back.
#[test]
fn an_interrupted_cat_of_a_held_open_is_released() {
    if !fuse_available() {
        return;
    }
    let Some(mut h) = held_frame(&[]) else {
        return;
    };
    let release = Release(&h.f);
    let p = h.m.path(&h.big);
    assert_eq!(std::fs::metadata(&p).unwrap().len(), h.want.len() as u64);
    let before = h.held();
    h.hold();
    let mut cat = Command::new("cat");
    cat.arg(&p).stdout(Stdio::null());
    let mut cat = with_default_sigint(cat).spawn().unwrap();
    wait_for(|| h.held() > before, "the open to reach the server");
    let st = kill_and_reap(&mut cat, libc::SIGINT, &h.m);
    assert!(signalled(st, libc::SIGINT), "{st:?}");
    drop(release);
    let log = h.m.log();
    assert!(log.contains("Answered"), "{log}");
    assert!(opened_then_interrupted(&log), "{log}");
    // Its open ends once released, its handle given back, not to the kernel.
    wait_for(
        || h.m.log().contains("was interrupted: undone"),
        "the interrupted open to be undone",
    );
    h.serves_on();
}

/// Did the daemon's `-d` log show an open, then an interrupt answered?
fn opened_then_interrupted(log: &str) -> bool {
    let open = log.find("open(");
    let int = log.rfind("Answered");
    matches!((open, int), (Some(o), Some(i)) if o < i)
}
