//! What the daemon is told, with every default in one place: the options
//! of the presented tree ([`FsOptions`], which make the decoder's
//! [`Env`]) and of the mount ([`MountArgs`], which holds them). The
//! command line (`crate::options`) fills these; `fs`, `fuse` and
//! `logging` read them. A leaf module: it imports none of the others.

use blosc_decode::container::{Env, DEFAULT_CACHE_SIZE, DEFAULT_DECODE_AHEAD};
use blosc_decode::io::Access;
use blosc_decode::DecodeAhead;
use bloscfs_remote::{Location, Options as RemoteOptions};
use std::path::PathBuf;
use std::time::Duration;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Parse a size with an optional K/M/G/T suffix (powers of 1024).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1u64 << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1 << 30),
        't' | 'T' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// Options of the presented tree: what its decoder is set up with.
#[derive(Debug, Clone)]
pub struct FsOptions {
    /// Bound of the decoded-block cache (bytes).
    pub cache_size: u64,
    /// Verify Bloscpack chunk checksums on first read.
    pub verify_checksums: bool,
    /// How far to decode past a sequential reader (automatic by default).
    pub decode_ahead: DecodeAhead,
    /// May block reads bypass the page cache (`O_DIRECT`)?
    pub source_io: Access,
}

impl Default for FsOptions {
    fn default() -> Self {
        FsOptions {
            cache_size: DEFAULT_CACHE_SIZE,
            verify_checksums: true,
            decode_ahead: DEFAULT_DECODE_AHEAD,
            source_io: Access::Auto,
        }
    }
}

impl FsOptions {
    /// The decoder's environment these options describe (its cache and
    /// decode-ahead pool are made here).
    pub fn env(&self) -> Env {
        let pool = std::sync::Arc::new(bloscfs_pool::Pool::per_cpu());
        pool.start();
        let mut env = Env::with_runner(self.cache_size, pool);
        env.verify_checksums = self.verify_checksums;
        env.decode_ahead = self.decode_ahead;
        env.source_io = self.source_io;
        env
    }
}

/// Who owns what a remote source shows, and its modes (`-o uid=`, `gid=`,
/// `file_mode=`, `dir_mode=`); `None`: the default (the mounting user's
/// ids, files 0444, directories 0555).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Perms {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub file_mode: Option<u32>,
    pub dir_mode: Option<u32>,
}

impl Perms {
    /// Any of them given?
    pub fn any(&self) -> bool {
        *self != Perms::default()
    }
}

/// The mount form's arguments: the tree's options and the mount's own.
#[derive(Debug, Clone)]
pub struct MountArgs {
    /// The source directory, or a remote source's URL as typed.
    pub source: PathBuf,
    /// The remote source SOURCE names, if it is a URL.
    pub location: Option<Location>,
    /// Options of a remote source.
    pub remote: RemoteOptions,
    /// Owner and modes of what a remote source shows.
    pub perms: Perms,
    /// How long what a remote listing says is trusted (`-o metadata_ttl=`).
    pub metadata_ttl: Duration,
    /// The part of `cache_size` for a remote source's fetched bytes
    /// (`-o fetch_cache=`; default a quarter).
    pub fetch_cache: Option<u64>,
    pub mountpoint: PathBuf,
    pub foreground: bool,
    pub debug: bool,
    /// The presented tree's options (`cache_size`, `verify_checksums`,
    /// `decode_ahead`, `source_io`).
    pub fs: FsOptions,
    /// FUSE worker threads as `-o threads=` gave them (0: not given; see
    /// [`MountArgs::fuse_threads`]).
    pub threads: usize,
    pub readahead: u64,
    /// The largest read the kernel sends, as `-o max_read` gave it (0: not
    /// given, the kernel's: 1 MiB). A read-ahead window larger than it
    /// comes as several requests, served at once.
    pub max_read: u64,
    /// Take requests through FUSE-over-io_uring queues when the kernel
    /// offers them (`-o uring`).
    pub uring: bool,
    /// Serve extended attributes (`-o xattr`). Off, the kernel is told
    /// once and asks no more.
    pub xattr: bool,
    pub allow_other: bool,
    pub allow_root: bool,
    pub default_permissions: bool,
    pub auto_unmount: bool,
    pub logfile: Option<PathBuf>,
    pub fsname: Option<String>,
    pub subtype: String,
    /// Kernel flags passed on (nodev, noexec, ...).
    pub flags: Vec<String>,
}

impl MountArgs {
    /// How `cache_size` is shared by a remote source: (decoded blocks,
    /// fetched compressed bytes and read-ahead). Both come out of the one
    /// budget; a local source gives it all to decoded blocks.
    pub fn cache_split(&self) -> Result<(u64, u64), String> {
        let total = self.fs.cache_size;
        if self.location.is_none() {
            return Ok((total, 0));
        }
        let fetch = self.fetch_cache.unwrap_or(total / 4);
        if fetch >= total {
            return Err(format!(
                "fetch_cache ({} MiB) must be less than cache_size ({} MiB), of which it is a part",
                fetch >> 20,
                total >> 20
            ));
        }
        Ok((total - fetch, fetch))
    }
}

/// FUSE worker threads of a remote source at least: a request to a
/// remote store waits for the network, and a stalled one holds its thread
/// until it times out, so threads are sized by those waits, not by the
/// CPUs. An idle thread costs little (a stack, and a request buffer whose
/// pages are touched only as far as requests reach).
pub const REMOTE_THREADS: usize = 32;

impl MountArgs {
    /// FUSE worker threads: `-o threads=` if given; else for a remote
    /// source [`REMOTE_THREADS`] or twice the CPUs if more; else the CPUs,
    /// at least 2.
    pub fn fuse_threads(&self) -> usize {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .max(2);
        match (self.threads, &self.location) {
            (0, Some(_)) => (2 * cpus).max(REMOTE_THREADS),
            (0, None) => cpus,
            (n, _) => n,
        }
    }
}

impl Default for MountArgs {
    fn default() -> Self {
        MountArgs {
            source: PathBuf::new(),
            location: None,
            remote: RemoteOptions::default(),
            perms: Perms::default(),
            metadata_ttl: Duration::from_secs(1),
            fetch_cache: None,
            mountpoint: PathBuf::new(),
            foreground: false,
            debug: false,
            fs: FsOptions::default(),
            threads: 0,
            readahead: 1 << 20,
            max_read: 0,
            uring: false,
            xattr: false,
            allow_other: false,
            allow_root: false,
            default_permissions: false,
            auto_unmount: false,
            logfile: None,
            fsname: None,
            subtype: "bloscfs".into(),
            flags: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A remote source's fetched bytes are counted against `cache_size`:
    /// the two parts add up to it.
    #[test]
    fn a_remote_source_shares_cache_size_with_its_fetched_bytes() {
        let mut m = MountArgs::default();
        assert_eq!(m.cache_split(), Ok((256 << 20, 0)));
        m.location = Location::parse("s3://bucket/prefix").and_then(Result::ok);
        assert_eq!(m.cache_split(), Ok((192 << 20, 64 << 20)));
        m.fetch_cache = Some(200 << 20);
        assert_eq!(m.cache_split(), Ok((56 << 20, 200 << 20)));
        m.fetch_cache = Some(256 << 20);
        assert!(m.cache_split().is_err());
    }

    /// A remote source gets more FUSE threads than the CPUs (its requests
    /// wait for the network); `-o threads=` wins over either default.
    #[test]
    fn a_remote_source_gets_threads_for_its_waits() {
        let mut m = MountArgs::default();
        let local = m.fuse_threads();
        assert!(local >= 2);
        m.location = Location::parse("s3://bucket/prefix").and_then(Result::ok);
        assert!(m.fuse_threads() >= REMOTE_THREADS.max(2 * local));
        m.threads = 3;
        assert_eq!(m.fuse_threads(), 3);
    }
}
