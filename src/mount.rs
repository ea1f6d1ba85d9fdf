//! The mount form: `bloscfs [-f] [-d] [-o OPTIONS] SOURCE MOUNTPOINT`:
//! the checks before mounting, the presented tree of the source, and
//! serving it. Its options are `crate::options`'; daemonizing, signals and
//! the reaper, `crate::lifecycle`; the log, `crate::logging`; the mount
//! table, `crate::mount_table`.

pub use crate::config::MountArgs;
use crate::fs::Fs;
use crate::fuse::{self, BloscFuse};
use crate::lifecycle;
use crate::logging::init_logging;
use crate::mount_table::{check_nesting, mounted_at};
use crate::options::parse;
use bloscfs_remote::Remote;
use std::io::Write;
use std::sync::Arc;

/// Physical memory in bytes, if known.
fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf only reads a configuration value.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    (pages > 0).then(|| pages as u64 * blosc_decode::io::page_size())
}

/// Raise the kernel read-ahead of our mount (root only; best effort).
fn set_readahead(mp: &std::path::Path, bytes: u64) {
    if bytes == 0 {
        return;
    }
    if let Some((majmin, _)) = mounted_at(mp) {
        let p = format!("/sys/class/bdi/{majmin}/read_ahead_kb");
        match std::fs::write(&p, format!("{}", bytes / 1024)) {
            Ok(()) => log::debug!("read-ahead set to {} KiB ({p})", bytes / 1024),
            Err(e) => log::debug!("cannot set read-ahead ({p}): {e}"),
        }
    }
}

/// Run the mount form; returns the process exit code.
pub fn main(args: &[String]) -> i32 {
    let m = match parse(args) {
        Ok(Some(m)) => m,
        Ok(None) => return 0,
        Err(e) => {
            eprintln!("bloscfs: {e}");
            return 2;
        }
    };
    if let Err(e) = m.cache_split() {
        eprintln!("bloscfs: {e}");
        return 2;
    }
    let source = match m.source.canonicalize() {
        _ if m.location.is_some() => m.source.clone(),
        Ok(p) if p.is_dir() => p,
        Ok(p) => {
            eprintln!("bloscfs: source {} is not a directory", p.display());
            return 1;
        }
        Err(e) => {
            eprintln!("bloscfs: source {}: {e}", m.source.display());
            return 1;
        }
    };
    let mountpoint = match m.mountpoint.canonicalize() {
        Ok(p) if p.is_dir() => p,
        Ok(p) => {
            eprintln!("bloscfs: mount point {} is not a directory", p.display());
            return 1;
        }
        Err(e) => {
            eprintln!("bloscfs: mount point {}: {e}", m.mountpoint.display());
            return 1;
        }
    };
    if m.location.is_some() {
        // A remote source cannot hold the mount point.
    } else if let Err(e) = check_nesting(&source, &mountpoint) {
        eprintln!("bloscfs: {e}");
        return 1;
    }
    if let Some((_, fstype)) = mounted_at(&mountpoint) {
        if fstype.starts_with("fuse") {
            eprintln!(
                "bloscfs: {} is already a mount point ({fstype}); unmount it first (fusermount3 -u {})",
                mountpoint.display(),
                mountpoint.display()
            );
            return 1;
        }
    }
    if !std::path::Path::new("/dev/fuse").exists() {
        eprintln!(
            "bloscfs: /dev/fuse is missing: load the fuse module (modprobe fuse) or install fuse3"
        );
        return 1;
    }
    let m = MountArgs {
        source,
        mountpoint,
        ..m
    };
    if m.foreground {
        if let Err(e) = init_logging(&m, false) {
            eprintln!("bloscfs: {e}");
            return 1;
        }
        return serve(&m, None);
    }
    lifecycle::daemonize(&m, |ready| serve(&m, ready))
}

/// The presented tree of the source: a local directory, or a remote store
/// reached now (after the fork: its runtime's threads live in the daemon)
/// and listed once, so that a wrong bucket, URL or credential fails the
/// mount instead of its first `ls` (that listing is kept, as any other).
fn open_tree(m: &MountArgs) -> std::io::Result<Fs> {
    let Some(loc) = &m.location else {
        return Fs::new(&m.source, &m.fs);
    };
    let (blocks, fetched) = m
        .cache_split()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut opts = m.remote.clone();
    opts.page_cache = fetched;
    let remote = Remote::connect(loc.clone(), opts)?;
    let started = std::time::Instant::now();
    let root = remote.list("")?;
    if root.dirs.is_empty() && root.objects.is_empty() {
        // Not an error, as `ls` of an empty prefix is not: but say so.
        log::warn!("{loc}: nothing there (no object under it): the mount is an empty directory");
    }
    let tree =
        crate::fs::RemoteTree::new(remote, &loc.to_string(), m.metadata_ttl).with_perms(m.perms);
    tree.keep_root(root, started);
    let fs_opts = crate::config::FsOptions {
        cache_size: blocks,
        ..m.fs.clone()
    };
    Fs::with_tree(Arc::new(tree), &fs_opts)
}

/// Mount and serve until unmounted. `ready` (daemon mode) gets "OK" once the
/// mount is up, or "E<message>" on failure.
fn serve(m: &MountArgs, ready: Option<std::fs::File>) -> i32 {
    lifecycle::raise_fd_limit();
    let fail = |ready: Option<std::fs::File>, msg: String| {
        match ready {
            Some(mut w) => {
                let _ = w.write_all(format!("E{msg}").as_bytes());
            }
            None => eprintln!("bloscfs: {msg}"),
        }
        1
    };
    let fs = match open_tree(m) {
        Ok(fs) => Arc::new(fs),
        Err(e) => return fail(ready, format!("{}: {e}", m.source.display())),
    };
    let own = Arc::new(std::sync::OnceLock::new());
    let adapter = BloscFuse {
        fs: fs.clone(),
        debug: m.debug,
        check_access: m.default_permissions,
        xattr: m.xattr,
        threads: m.fuse_threads(),
        own: own.clone(),
        calls: Default::default(),
    };
    // Catch signals before mounting: one arriving while the mount is set up
    // is kept and handled (unmount) instead of killing us over a live mount.
    let signals = signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
    let mut session = match fuse::Session::mount(adapter, m) {
        Ok(s) => s,
        Err(e) => {
            return fail(
                ready,
                format!("cannot mount on {}: {e}", m.mountpoint.display()),
            )
        }
    };
    let fd = session.device_fd();
    if let Some((dev, _)) = mounted_at(&m.mountpoint) {
        let path = m.mountpoint.clone();
        let _ = own.set(fuse::OwnMount { path, dev, fd });
    }
    set_readahead(&m.mountpoint, m.readahead);
    if let Some(ram) = physical_memory().filter(|&r| m.fs.cache_size > r) {
        log::warn!(
            "cache_size {} MiB is more than the physical memory ({} MiB): the cache may fill it and push the system into swap or the OOM killer",
            m.fs.cache_size >> 20,
            ram >> 20
        );
    }
    log::info!(
        "mounted {} on {} (cache {} MiB, {} threads)",
        m.source.display(),
        m.mountpoint.display(),
        m.fs.cache_size >> 20,
        m.fuse_threads()
    );
    lifecycle::spawn_reaper(&fs);
    lifecycle::unmount_on_signals(signals, session.unmounter(), fd, m.mountpoint.clone());
    if let Some(mut w) = ready {
        let _ = w.write_all(b"OK");
        drop(w);
        lifecycle::detach_stdio();
    }
    match session.run() {
        Ok(()) => {
            log::info!("unmounted {}", m.mountpoint.display());
            0
        }
        Err(e) => {
            log::error!("session ended with an error: {e}");
            1
        }
    }
}
