//! The daemon's log: stderr in the foreground (env_logger), syslog or a
//! file when daemonized or asked for (`-o logfile=`).

use crate::config::{MountArgs, VERSION};
use crate::fuse;
use std::io::Write;

/// A small logger: stderr in the foreground, syslog or a file when daemonized.
struct Logger {
    level: log::LevelFilter,
    sink: parking_lot::Mutex<Sink>,
}

enum Sink {
    Stderr,
    Syslog,
    File(std::fs::File),
}

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata) -> bool {
        // Other crates (the FUSE library) only for errors: their warnings are about
        // requests we deliberately leave to the kernel's defaults.
        m.level() <= self.level
            && (m.target().starts_with("bloscfs")
                || m.level() <= log::Level::Error
                || (m.level() <= log::Level::Warn && !m.target().starts_with(fuse::LOG_TARGET)))
    }
    fn log(&self, r: &log::Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let msg = format!("{}: {}", r.level().as_str().to_lowercase(), r.args());
        // Each line in one write: daemons sharing a log file (opened for
        // appending) never interleave within a line.
        match &mut *self.sink.lock() {
            Sink::Stderr => {
                let _ = std::io::stderr().write_all(format!("bloscfs: {msg}\n").as_bytes());
            }
            Sink::File(f) => {
                let line = format!("bloscfs[{}]: {msg}\n", std::process::id());
                let _ = f.write_all(line.as_bytes());
            }
            Sink::Syslog => {
                let prio = match r.level() {
                    log::Level::Error => libc::LOG_ERR,
                    log::Level::Warn => libc::LOG_WARNING,
                    log::Level::Info => libc::LOG_INFO,
                    _ => libc::LOG_DEBUG,
                };
                if let Ok(c) = std::ffi::CString::new(msg.replace('\0', " ")) {
                    // SAFETY: constant format string and a valid C string argument.
                    unsafe { libc::syslog(prio, c"%s".as_ptr(), c.as_ptr()) };
                }
            }
        }
    }
    fn flush(&self) {}
}

/// Open (or create) the log file for appending: it must be a regular file
/// that takes a line (its first: where the log starts). A fifo is refused
/// rather than waited on for a reader, and a file that refuses writes
/// (`/proc/version`) at start rather than losing every line.
fn open_logfile(p: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(p)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other(
            "not a regular file (a fifo, socket or device)",
        ));
    }
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    // SAFETY: fcntl on a descriptor owned here; no memory involved.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    let first = format!(
        "bloscfs[{}]: info: bloscfs {} logging\n",
        std::process::id(),
        VERSION
    );
    f.write_all(first.as_bytes())
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot be written: {e}")))?;
    Ok(f)
}

/// `bloscfs cat` and `info`: warnings on stderr (why a remote store
/// failed, a retry), or what `BLOSCFS_LOG` asks for.
pub fn init_cli_logging() {
    let mut b = env_logger::Builder::new();
    b.filter_level(log::LevelFilter::Warn)
        .filter_module(fuse::LOG_TARGET, log::LevelFilter::Off)
        .format(|out, r| {
            writeln!(
                out,
                "bloscfs: {}: {}",
                r.level().as_str().to_lowercase(),
                r.args()
            )
        });
    if let Ok(spec) = std::env::var("BLOSCFS_LOG") {
        b.parse_filters(&spec);
    }
    let _ = b.try_init();
}

pub fn init_logging(m: &MountArgs, daemon: bool) -> Result<(), String> {
    let default = if m.debug {
        log::LevelFilter::Debug
    } else {
        log::LevelFilter::Info
    };
    let level = std::env::var("BLOSCFS_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    if m.logfile.is_none() && !daemon {
        // Foreground: env_logger on stderr. BLOSCFS_LOG (or RUST_LOG) takes
        // env_logger filter syntax and overrides the default level.
        let mut b = env_logger::Builder::new();
        b.filter_level(log::LevelFilter::Warn)
            // The FUSE library warns when the mount point was already unmounted from
            // outside (fusermount3 -u, umount): noise unless debugging.
            .filter_module(
                fuse::LOG_TARGET,
                if m.debug {
                    level
                } else {
                    log::LevelFilter::Error
                },
            )
            .filter_module("bloscfs", level)
            .format_target(false);
        if let Ok(spec) = std::env::var("BLOSCFS_LOG").or_else(|_| std::env::var("RUST_LOG")) {
            b.parse_filters(&spec);
        }
        let _ = b.try_init();
        return Ok(());
    }
    let sink = match (&m.logfile, daemon) {
        (Some(p), _) => {
            Sink::File(open_logfile(p).map_err(|e| format!("logfile {}: {e}", p.display()))?)
        }
        (None, true) => {
            // SAFETY: a static identifier string; openlog keeps the pointer.
            unsafe { libc::openlog(c"bloscfs".as_ptr(), libc::LOG_PID, libc::LOG_DAEMON) };
            Sink::Syslog
        }
        (None, false) => Sink::Stderr,
    };
    let _ = log::set_boxed_logger(Box::new(Logger {
        level,
        sink: parking_lot::Mutex::new(sink),
    }));
    log::set_max_level(level);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use log::Log;
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};

    /// Each log line reaches its file in one write: through a datagram
    /// socket (one datagram per write), every datagram is one whole line.
    #[test]
    fn a_log_line_is_one_write() {
        let mut fds = [0i32; 2];
        // SAFETY: fds is a valid two-element array.
        let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, fds.as_mut_ptr()) };
        assert_eq!(r, 0);
        // SAFETY: both descriptors were just created and are owned here.
        let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let logger = Logger {
            level: log::LevelFilter::Debug,
            sink: parking_lot::Mutex::new(Sink::File(std::fs::File::from(a))),
        };
        for i in 0..3 {
            logger.log(
                &log::Record::builder()
                    .level(log::Level::Warn)
                    .target("bloscfs::fs")
                    .args(format_args!("message {i} with some words"))
                    .build(),
            );
        }
        let mut r = std::fs::File::from(b);
        for i in 0..3 {
            let mut buf = [0u8; 4096];
            let n = r.read(&mut buf).unwrap();
            assert_eq!(
                std::str::from_utf8(&buf[..n]).unwrap(),
                format!(
                    "bloscfs[{}]: warn: message {i} with some words\n",
                    std::process::id()
                )
            );
        }
    }
}
