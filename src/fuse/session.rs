//! The FUSE session: mounting with the options asked, the worker threads
//! and the connection's state.

use super::BloscFuse;
use crate::config::MountArgs;

/// A mounted file system, served by [`Session::run`].
pub struct Session(fuser::Session<BloscFuse>);

impl Session {
    /// Mount `fs` as `m` says (options, access, worker threads).
    pub fn mount(fs: BloscFuse, m: &MountArgs) -> std::io::Result<Session> {
        fuser::Session::new(fs, &m.mountpoint, &config(m)).map(Session)
    }

    /// A handle that unmounts from another thread (the signal handler);
    /// `run` then returns.
    pub fn unmounter(&mut self) -> impl FnMut() -> std::io::Result<()> + Send + 'static {
        let mut u = self.0.unmount_callable();
        move || u.unmount()
    }

    /// The session's `/dev/fuse` descriptor (see [`connected`]).
    pub fn device_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::{AsFd, AsRawFd};
        self.0.as_fd().as_raw_fd()
    }

    /// Serve requests until unmounted.
    pub fn run(self) -> std::io::Result<()> {
        self.0.run()
    }
}

fn config(m: &MountArgs) -> fuser::Config {
    use fuser::MountOption as O;
    let mut c = fuser::Config::default();
    let fsname = m
        .fsname
        .clone()
        .unwrap_or_else(|| m.source.to_string_lossy().into_owned());
    c.mount_options = vec![O::FSName(fsname), O::Subtype(m.subtype.clone()), O::RO];
    if m.default_permissions {
        c.mount_options.push(O::DefaultPermissions);
    }
    if m.auto_unmount {
        c.mount_options.push(O::AutoUnmount);
    }
    for f in &m.flags {
        c.mount_options.push(match f.as_str() {
            "nodev" => O::NoDev,
            "nosuid" => O::NoSuid,
            "noexec" => O::NoExec,
            "noatime" => O::NoAtime,
            "dev" => O::Dev,
            "suid" => O::Suid,
            "exec" => O::Exec,
            "atime" => O::Atime,
            _ => O::RO,
        });
    }
    c.mount_options.dedup();
    if m.max_read > 0 {
        c.mount_options
            .push(O::CUSTOM(format!("max_read={}", m.max_read)));
    }
    c.acl = if m.allow_other {
        fuser::SessionACL::All
    } else if m.allow_root || m.auto_unmount {
        // fuser's auto_unmount needs more than owner-only access; allow_root
        // adds nobody who could not read the source anyway.
        fuser::SessionACL::RootAndOwner
    } else {
        fuser::SessionACL::Owner
    };
    c.n_threads = Some(m.fuse_threads());
    // Each worker thread reads requests from its own /dev/fuse clone.
    c.clone_fd = true;
    c.io_uring = m.uring;
    c
}

/// Is the FUSE connection of `/dev/fuse` descriptor `fd` still up? An
/// unmount (or an abort through fusectl) ends it, and `poll` says so
/// (`POLLERR`), while a mount table may already show a new mount at the
/// same path, even with the same device number.
pub fn connected(fd: std::os::fd::RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no timeout.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    !(r > 0 && p.revents & (libc::POLLERR | libc::POLLNVAL) != 0)
}

/// What identifies our mount once it is up.
#[derive(Debug)]
pub struct OwnMount {
    /// The mount point.
    pub path: std::path::PathBuf,
    /// The mount's device (`maj:min`).
    pub dev: String,
    /// The session's `/dev/fuse` descriptor.
    pub fd: std::os::fd::RawFd,
}

/// Read requests the kernel may have outstanding on the mount at once
/// (read-ahead is sent as such background requests; the kernel's default
/// is 12, fuser's 16). Sequential readers keep about two each in flight,
/// and a thread that has replied should find the next one queued: four
/// per FUSE thread, so that many readers keep every thread busy.
pub fn max_background(threads: usize) -> u16 {
    (threads.saturating_mul(4)).clamp(16, 1024) as u16
}
