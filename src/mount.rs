//! The mount form: `bloscfs [-f] [-d] [-o OPTIONS] SOURCE MOUNTPOINT`.
//! Option parsing, daemonizing (the parent returns once the mount is
//! ready), signals (SIGINT/SIGTERM/SIGHUP unmount cleanly). The log is
//! `crate::logging`; the mount table, `crate::mounts`.

pub use crate::config::MountArgs;
use crate::config::{parse_size, VERSION};
use crate::fs::Fs;
use crate::fuse::{self, BloscFuse};
use crate::logging::init_logging;
use crate::mounts::{check_nesting, mounted_at};
use bloscfs_remote::{Location, Remote};
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

pub const USAGE: &str = "\
usage: bloscfs [-f] [-d] [-o OPTION[,OPTION...]] SOURCE MOUNTPOINT
       bloscfs cat [-o OPTIONS] [--offset N] [--length N] [--raw] [--no-verify] [--stats] FILE
       bloscfs info [-o OPTIONS] [--chunks] [--stats] FILE

SOURCE is a directory, or a remote store: s3://BUCKET[/PREFIX],
http(s)://HOST/PATH/ (listed by a manifest or an S3-style listing), or
caterva2://HOST[:PORT]/ROOT[/PATH]. FILE may be a URL of these forms too.

Mounts the directory tree SOURCE read-only at MOUNTPOINT. Every Blosc
container in it (Blosc1/Blosc2 chunks, Blosc2 frames and sparse frames,
packed super-chunks, Bloscpack files; detected by content) appears as a
plain file of its uncompressed bytes, named without its suffix; b2nd arrays
and Bloscpack NumPy arrays appear as .npy files. Other files pass through.

Options:
  -f                     stay in the foreground (default: daemonize once mounted)
  -d                     debug: foreground, and log every FUSE request (also -o debug)
  -s                     accepted for libfuse compatibility, ignored
  -h, --help             this help
  -V, --version          the version
  -o cache_size=SIZE     decoded-block cache bound, bytes with K/M/G suffix (default 256M)
  -o threads=N           FUSE worker threads (default: number of CPUs, at least 2;
                         for a remote source 32, or twice the CPUs if more)
  -o readahead=SIZE      kernel read-ahead for the mount (default 1M; 0 leaves the kernel's)
  -o decode_ahead=SIZE   decode this far past each sequential reader on idle CPUs (default auto:
                         one 4 MiB span per CPU the readers leave idle, from 4 CPUs; 0: off)
  -o source_io=MODE      auto (default): a cold random block read bypasses the page cache;
                         buffered: never; direct: always where the file system allows it
  -o allow_other         let other users read (implies default_permissions)
  -o allow_root          let root read too
  -o default_permissions let the kernel check permissions
  -o verify_checksums    verify Bloscpack chunk checksums on first read (default)
  -o noverify            do not verify Bloscpack checksums
  -o xattr               serve extended attributes (user.blosc.*, user.bloscfs.stats);
                         `ls -l` then asks two of every entry (default: off)
  -o logfile=PATH        log to PATH instead of syslog when daemonized
  -o fsname=NAME         source name shown in mount tables (default: SOURCE)
  -o subtype=NAME        file system subtype (default: bloscfs)
  -o auto_unmount        unmount when the daemon dies (implies allow_root)
Remote sources:
  -o region=NAME         S3 region (default: from the AWS environment, else us-east-1)
  -o endpoint=URL        S3 endpoint of another store (MinIO, Ceph: http://host:9000)
  -o anonymous           do not sign S3 requests (public buckets)
  -o manifest=NAME       HTTP: the listing file under the URL (SIZE PATH per line)
  -o user=NAME           Caterva2: log in as NAME ...
  -o password_file=PATH  ... with the password in PATH
  -o ca_file=PATH        HTTPS: also trust the certificate authorities in PATH (PEM)
  -o follow_redirects    S3, Caterva2: follow redirects to the same scheme, host and port
                         (never to another; plain HTTP sources always follow those)
  -o uid=N, gid=N        owner of every file and directory shown (default: the mounting user)
  -o file_mode=MODE      mode of files, octal, no write bits (default 0444)
  -o dir_mode=MODE       mode of directories (default 0555); with allow_other, these
                         decide which local users read what the store's credentials reach
  -o timeout=SECS        limit of one request, retried before it fails (default 10)
  -o retries=N           retries of a failed request, with backoff (default 3)
  -o fetch_cache=SIZE    the part of cache_size for fetched compressed bytes and
                         read-ahead (default a quarter)
  -o metadata_ttl=SECS   how long a listing answers stats (default 1)
  -o ro, nodev, nosuid, noexec, noatime, dev, suid, exec, atime
                         passed to the kernel (the mount is always read-only)
  -o rw, defaults, auto, noauto, user, users, nouser, nofail, _netdev, x-*
                         accepted for fstab and ignored
";

/// Parse the mount form. `Ok(None)`: help or version was printed.
pub fn parse(args: &[String]) -> Result<Option<MountArgs>, String> {
    let mut pos = Vec::new();
    let mut opts: Vec<String> = Vec::new();
    let mut m = MountArgs::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(None);
            }
            "-V" | "--version" => {
                println!("bloscfs {}", VERSION);
                return Ok(None);
            }
            "-f" => m.foreground = true,
            "-d" => {
                m.debug = true;
                m.foreground = true;
            }
            "-s" => {} // single-threaded in libfuse terms: accepted, ignored
            "-o" => opts.push(it.next().ok_or("-o needs an argument")?.clone()),
            s if s.starts_with("-o") => opts.push(s[2..].to_string()),
            s if s.starts_with('-') && s.len() > 1 => {
                let e = crate::config::unknown_flag(s);
                return Err(format!("{e}\n\n{USAGE}"));
            }
            s => pos.push(s.to_string()),
        }
    }
    for o in opts
        .iter()
        .flat_map(|o| o.split(','))
        .filter(|o| !o.is_empty())
    {
        apply_option(&mut m, o)?;
    }
    if pos.len() != 2 {
        return Err(format!("expected SOURCE and MOUNTPOINT\n\n{USAGE}"));
    }
    m.source = PathBuf::from(&pos[0]);
    m.location = Location::parse(&pos[0]).transpose()?;
    crate::config::check_applies(m.location.as_ref(), &m.remote)?;
    if m.location.is_none() && m.perms.any() {
        return Err("uid, gid, file_mode and dir_mode are for remote sources: a local directory shows its files' own owners and modes".into());
    }
    m.mountpoint = PathBuf::from(&pos[1]);
    Ok(Some(m))
}

/// Apply mount option `o` (`key` or `key=value`) to `m`.
fn apply_option(m: &mut MountArgs, o: &str) -> Result<(), String> {
    let (k, v) = match o.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (o, None),
    };
    fn need<'a>(k: &str, v: Option<&'a str>) -> Result<&'a str, String> {
        v.ok_or_else(|| format!("option {k} needs a value ({k}=...)"))
    }
    match k {
        "cache_size" => {
            let v = need(k, v)?;
            m.fs.cache_size =
                parse_size(v).ok_or_else(|| format!("cache_size: not a size: {v}"))?;
        }
        "threads" => {
            let v = need(k, v)?;
            m.threads = v
                .parse()
                .ok()
                .filter(|&n: &usize| (1..=256).contains(&n))
                .ok_or_else(|| format!("threads: not a number from 1 to 256: {v}"))?;
        }
        "readahead" => {
            let v = need(k, v)?;
            m.readahead = parse_size(v).ok_or_else(|| format!("readahead: not a size: {v}"))?;
        }
        "decode_ahead" => {
            let v = need(k, v)?;
            m.fs.decode_ahead = blosc_decode::DecodeAhead::parse(v, parse_size)
                .ok_or_else(|| format!("decode_ahead: not auto or a size: {v}"))?;
        }
        "source_io" => {
            let v = need(k, v)?;
            m.fs.source_io = blosc_decode::io::Access::parse(v)
                .ok_or_else(|| format!("source_io: not one of auto, buffered, direct: {v}"))?;
        }
        "allow_other" => {
            m.allow_other = true;
            m.default_permissions = true;
        }
        "allow_root" => m.allow_root = true,
        "default_permissions" => m.default_permissions = true,
        "verify_checksums" | "verify" => m.fs.verify_checksums = true,
        "noverify" | "noverify_checksums" => m.fs.verify_checksums = false,
        "noxattr" => m.xattr = false,
        "xattr" => m.xattr = true,
        "logfile" => m.logfile = Some(crate::config::path_option(k, need(k, v)?)?),
        "fsname" => m.fsname = Some(need(k, v)?.to_string()),
        "subtype" => m.subtype = need(k, v)?.to_string(),
        "auto_unmount" => m.auto_unmount = true,
        "metadata_ttl" => m.metadata_ttl = crate::config::parse_seconds(k, need(k, v)?)?,
        "fetch_cache" => {
            let v = need(k, v)?;
            m.fetch_cache =
                Some(parse_size(v).ok_or_else(|| format!("fetch_cache: not a size: {v}"))?);
        }
        "debug" => {
            m.debug = true;
            m.foreground = true;
        }
        "ro" | "nodev" | "nosuid" | "noexec" | "noatime" | "dev" | "suid" | "exec" | "atime" => {
            m.flags.push(k.to_string())
        }
        // fstab's `user` has no value; `user=NAME` is Caterva2's.
        "user" if v.is_none() => {}
        "rw" | "defaults" | "auto" | "noauto" | "users" | "nouser" | "nofail" | "_netdev"
        | "owner" | "comment" => {}
        k if k.starts_with("x-") => {}
        _ if crate::config::apply_remote_option(&mut m.remote, k, v)? => {}
        _ if m.perms.apply(k, v)? => {}
        _ => {
            let e = crate::config::unknown_option(k);
            return Err(format!("{e} (see bloscfs --help)"));
        }
    }
    Ok(())
}

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

/// Open containers hold file descriptors: raise the soft limit to the hard one.
fn raise_fd_limit() {
    if let Some(mut r) = blosc_decode::io::fd_limits() {
        if r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            // SAFETY: setrlimit only reads the limits from `r`, a valid struct.
            let _ = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
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
    daemonize(&m)
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
    opts.span_cache = fetched;
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

/// Fork a daemon that mounts and serves; returns the exit code once
/// the mount is ready or has failed.
fn daemonize(m: &MountArgs) -> i32 {
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
            std::process::exit(serve(m, Some(std::fs::File::from(wr))))
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
fn spawn_reaper(fs: &Arc<Fs>) {
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
fn unmount_on_signals(
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
fn detach_stdio() {
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

/// Mount and serve until unmounted. `ready` (daemon mode) gets "OK" once the
/// mount is up, or "E<message>" on failure.
fn serve(m: &MountArgs, ready: Option<std::fs::File>) -> i32 {
    raise_fd_limit();
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
    let ours = Arc::new(std::sync::OnceLock::new());
    let adapter = BloscFuse {
        fs: fs.clone(),
        debug: m.debug,
        check_access: m.default_permissions,
        xattr: m.xattr,
        threads: m.fuse_threads(),
        ours: ours.clone(),
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
        let _ = ours.set((m.mountpoint.clone(), dev, fd));
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
    spawn_reaper(&fs);
    unmount_on_signals(signals, session.unmounter(), fd, m.mountpoint.clone());
    if let Some(mut w) = ready {
        let _ = w.write_all(b"OK");
        drop(w);
        detach_stdio();
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

#[cfg(test)]
mod tests {
    use super::parse;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    /// `user=NAME` is Caterva2's user; fstab's `user` (no value) is ignored.
    #[test]
    fn user_with_a_value_is_the_caterva2_user() {
        let a = args(&[
            "-o",
            "user=alice,password_file=/pw",
            "caterva2://h/@public",
            "/mnt",
        ]);
        let m = parse(&a).unwrap().unwrap();
        assert_eq!(m.remote.user.as_deref(), Some("alice"));
        let a = args(&["-o", "ro,user,noauto", "caterva2://h/@public", "/mnt"]);
        assert_eq!(parse(&a).unwrap().unwrap().remote.user, None);
    }
}
