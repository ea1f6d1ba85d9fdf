//! The daemon's life: forking once the mount is ready (the parent waits
//! for the child's word), detaching from the terminal, the descriptor
//! limit, the reaper of deleted sources, and the signals that unmount.

use crate::config::MountArgs;
use crate::fs::Fs;
use crate::fuse;
use crate::logging::init_logging;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

/// Open containers hold file descriptors: raise the soft limit to the hard one.
pub fn raise_fd_limit() {
    if let Some(mut r) = crate::local::fd_limits() {
        if r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            // SAFETY: setrlimit only reads the limits from `r`, a valid struct.
            let _ = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
        }
    }
}

/// Fork a daemon that mounts and serves; returns the exit code once
/// the mount is ready or has failed.
pub fn daemonize(m: &MountArgs, serve: impl FnOnce(Option<std::fs::File>) -> i32) -> i32 {
    // Daemonize: the child mounts and tells the parent through a pipe.
    let mut fds = [0i32; 2];
    // Close-on-exec, so that helpers the child runs (fusermount3, which
    // stays alive with auto_unmount) do not hold the parent waiting.
    // SAFETY: fds is a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        eprintln!("bloscfs: pipe: {}", std::io::Error::last_os_error());
        return 1;
    }
    // SAFETY: the pipe fds were just created and are owned here.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: single-threaded at this point (no threads spawned yet).
    match unsafe { libc::fork() } {
        -1 => {
            eprintln!("bloscfs: fork: {}", std::io::Error::last_os_error());
            1
        }
        0 => {
            drop(rd);
            // SAFETY: plain system calls in the child.
            unsafe {
                libc::setsid();
            }
            let _ = std::env::set_current_dir("/");
            if let Err(e) = init_logging(m, true) {
                let mut w = std::fs::File::from(wr);
                let _ = w.write_all(format!("E{e}").as_bytes());
                std::process::exit(1);
            }
            std::process::exit(serve(Some(std::fs::File::from(wr))))
        }
        _child => {
            drop(wr);
            let mut r = std::fs::File::from(rd);
            let mut msg = String::new();
            let _ = r.read_to_string(&mut msg);
            if msg.starts_with("OK") {
                0
            } else {
                let msg = msg.strip_prefix('E').unwrap_or(&msg);
                if msg.is_empty() {
                    eprintln!("bloscfs: the daemon exited before the mount was ready");
                } else {
                    eprintln!("bloscfs: {msg}");
                }
                1
            }
        }
    }
}

/// Deleted sources free their disk space once no descriptor holds them:
/// every 2 s, close those of kept containers no handle uses.
pub fn spawn_reaper(fs: &Arc<Fs>) {
    let weak = Arc::downgrade(fs);
    let _ = std::thread::Builder::new()
        .name("bloscfs-reaper".into())
        .spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_secs(2));
            let Some(fs) = weak.upgrade() else { return };
            let n = fs.release_deleted();
            if n > 0 {
                log::debug!("closed {n} containers whose source was deleted");
            }
        });
}

/// Unmount on SIGINT/SIGTERM/SIGHUP, unless the connection of `/dev/fuse`
/// descriptor `fd` is gone already, and end the process: a request still in
/// the daemon (a stalled remote read) would hold the event loop's end until
/// it times out, and its caller with it. Ending the process closes the
/// FUSE device, which aborts the connection: every request still waiting
/// fails.
pub fn unmount_on_signals(
    signals: std::io::Result<signal_hook::iterator::Signals>,
    mut unmount: impl FnMut() -> std::io::Result<()> + Send + 'static,
    fd: std::os::fd::RawFd,
    mp: PathBuf,
) {
    match signals {
        Ok(mut signals) => {
            std::thread::spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    if !fuse::connected(fd) {
                        // Unmounted already: the path may hold another mount now.
                        log::info!("signal {sig}: {} is no longer mounted", mp.display());
                        return;
                    }
                    log::info!("signal {sig}: unmounting {}", mp.display());
                    if let Err(e) = unmount() {
                        // Busy (a file open on it): detached, it goes once
                        // the connection ends, below.
                        log::warn!("unmount failed ({e}); trying fusermount3 -u -z");
                        let _ = std::process::Command::new("fusermount3")
                            .arg("-u")
                            .arg("-z")
                            .arg(&mp)
                            .status();
                    }
                    log::info!("unmounted {}", mp.display());
                    std::process::exit(0);
                }
            });
        }
        Err(e) => log::warn!("cannot catch signals: {e}"),
    }
}

/// Detach from the terminal (the parent has its answer).
pub fn detach_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&null);
        // SAFETY: duplicating a valid fd onto the standard descriptors.
        unsafe {
            libc::dup2(fd, 0);
            libc::dup2(fd, 1);
            libc::dup2(fd, 2);
        }
    }
}
