//! Decoding ahead of sequential readers through a real mount: exact bytes
//! with one and several readers, spans answered from when decoding ahead
//! is on, nothing decoded ahead where the automatic policy leaves the CPUs
//! to the readers, and what the kernel may queue for the daemon.

use crate::common::*;
use crate::mount::{sh, Mount};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// A 24 MiB float64 series written by python-blosc2 (lz4, shuffle, 2 MiB
/// chunks) into the mount's source, and its bytes.
fn series(m: &Mount) -> Vec<u8> {
    let py = python().expect("python with blosc2 (scripts/setup.sh)");
    let raw = m.dir.path().join("series.raw");
    let make = format!(
        "import numpy as np, blosc2\n\
         a = np.sin(np.arange(3 << 20) / 1000.0)\n\
         s = blosc2.SChunk(chunksize=2 << 20, data=a, cparams={{'codec': blosc2.Codec.LZ4, 'typesize': 8}})\n\
         open('{src}/series.b2frame', 'wb').write(s.to_cframe())\n\
         open('{raw}', 'wb').write(a.tobytes())\n",
        src = m.src().display(),
        raw = raw.display()
    );
    let o = Command::new(&py).arg("-c").arg(make).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read(raw).unwrap()
}

/// One counter of the daemon's `user.bloscfs.stats`.
pub(crate) fn stat(mp: &Path, name: &str) -> u64 {
    let o = sh(&format!(
        "getfattr -n user.bloscfs.stats --only-values --absolute-names {}",
        mp.display()
    ));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// `readers` threads each read their part of `path` front to back in
/// 1 MiB reads, checked against `want`.
fn read_in_parts(path: &Path, want: &[u8], readers: usize) {
    let part = want.len().div_ceil(readers);
    std::thread::scope(|s| {
        for r in 0..readers {
            s.spawn(move || {
                let f = std::fs::File::open(path).unwrap();
                let (mut off, end) = (r * part, ((r + 1) * part).min(want.len()));
                let mut buf = vec![0u8; 1 << 20];
                while off < end {
                    let n = f.read_at(&mut buf, off as u64).unwrap();
                    assert!(n > 0, "short file at {off}");
                    let n = n.min(end - off);
                    assert!(buf[..n] == want[off..off + n], "reader {r}: bytes at {off}");
                    off += n;
                }
            });
        }
    });
}

#[test]
fn sequential_readers_are_answered_from_spans_decoded_ahead() {
    if !fuse_available() {
        return;
    }
    let m = Mount::prepare();
    let want = series(&m);
    let mut m = m.mount_foreground(&["-o", "decode_ahead=16M,xattr"]);
    let mp = m.mp();
    let file = mp.join("series");
    read_in_parts(&file, &want, 1);
    let spans = stat(&mp, "spans_decoded");
    let served = stat(&mp, "span_bytes_served");
    assert!(spans > 0 && served > 0, "spans {spans}, served {served}");
    // Several readers at once, each its own open file, the kernel's page
    // cache dropped first: each is sequential, and decoded ahead.
    sh("sync; echo 1 > /proc/sys/vm/drop_caches");
    read_in_parts(&file, &want, 4);
    assert!(stat(&mp, "spans_decoded") > spans, "no span for 4 readers");
    let o = sh(&format!(
        "cmp {} {}",
        file.display(),
        m.dir.path().join("series.raw").display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    m.unmount();
}

/// On one CPU the automatic policy decodes nothing ahead: the reader's own
/// requests keep it busy.
#[test]
fn one_cpu_leaves_decoding_to_the_reader() {
    if !fuse_available() {
        return;
    }
    let mut m = Mount::prepare();
    let want = series(&m);
    let child = Command::new("taskset")
        .args(["-c", "0"])
        .arg(bin())
        .args(["-f", "-o", "xattr"])
        .arg(m.src())
        .arg(m.mp())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("taskset (util-linux)");
    m.child = Some(child);
    let mp = m.mp();
    wait_for(|| mount_answers(&mp), "the mount");
    read_in_parts(&mp.join("series"), &want, 1);
    assert_eq!(stat(&mp, "spans_decoded"), 0);
    m.unmount();
}

/// The kernel may queue four read requests per FUSE thread (its default,
/// 12, would leave threads idle with many readers).
#[test]
fn the_kernel_may_queue_four_requests_per_thread() {
    if !fuse_available() {
        return;
    }
    let mut m = Mount::prepare().mount_foreground(&["-o", "threads=8"]);
    let dev = mount_dev(&m.mp()).unwrap();
    let conn = Path::new("/sys/fs/fuse/connections").join(dev.split(':').nth(1).unwrap());
    if !conn.exists() {
        let _ = Command::new("mount")
            .args(["-t", "fusectl", "fusectl", "/sys/fs/fuse/connections"])
            .status();
    }
    let read = |f: &str| std::fs::read_to_string(conn.join(f)).map(|s| s.trim().to_string());
    match read("max_background") {
        Ok(v) => {
            assert_eq!(v, "32");
            assert_eq!(read("congestion_threshold").unwrap(), "24");
        }
        Err(e) if std::env::var_os("CI").is_some() => panic!("{}: {e}", conn.display()),
        Err(e) => eprintln!("skipped: {}: {e} (fusectl not mounted)", conn.display()),
    }
    m.unmount();
}
