//! What the daemon is told, with every default in one place: the options
//! of the presented tree ([`FsOptions`], which make the decoder's
//! [`Env`]) and of the mount ([`MountArgs`], which holds them). The
//! command line (`crate::mount::parse`) fills these; `fs`, `fuse` and
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
        let mut env = Env::new(self.cache_size);
        env.verify_checksums = self.verify_checksums;
        env.decode_ahead = self.decode_ahead;
        env.source_io = self.source_io;
        env
    }
}

/// Apply `key[=value]` if it is an option of remote sources (`region`,
/// `endpoint`, `anonymous`, `manifest`, `user`, `password_file`,
/// `ca_file`, `follow_redirects`, `timeout`, `retries`, `fetch_cache`):
/// `Ok(false)` if it is not one.
pub fn apply_remote_option(
    r: &mut RemoteOptions,
    k: &str,
    v: Option<&str>,
) -> Result<bool, String> {
    let need = || v.ok_or_else(|| format!("option {k} needs a value ({k}=...)"));
    match k {
        "region" => {
            let v = need()?;
            bloscfs_remote::check_region(k, v)?;
            r.region = Some(v.to_string());
        }
        "endpoint" => {
            let v = need()?;
            bloscfs_remote::check_endpoint(k, v)?;
            r.endpoint = Some(v.to_string());
        }
        "anonymous" => r.anonymous = true,
        "follow_redirects" => r.follow_redirects = true,
        "manifest" => r.manifest = Some(need()?.to_string()),
        "user" => r.user = Some(need()?.to_string()),
        "password_file" => r.password_file = Some(path_option(k, need()?)?),
        "ca_file" => r.ca_file = Some(path_option(k, need()?)?),
        "timeout" => r.timeout = parse_seconds(k, need()?)?,
        "retries" => {
            let v = need()?;
            r.retries = v
                .parse()
                .ok()
                .filter(|&n: &u32| n <= 10)
                .ok_or_else(|| format!("retries: not a number from 0 to 10: {v}"))?;
        }
        "fetch_cache" => {
            let v = need()?;
            r.span_cache = parse_size(v).ok_or_else(|| format!("fetch_cache: not a size: {v}"))?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Refuse the options of `r` that do not apply to the source `loc`
/// (`None`: a local path): S3's `region=`, `endpoint=`, `anonymous` on
/// other stores, HTTP's `manifest=`, Caterva2's `user=`/`password_file=`,
/// and every remote option on a local source.
pub fn check_applies(loc: Option<&Location>, r: &RemoteOptions) -> Result<(), String> {
    let d = RemoteOptions::default();
    let given = [
        ("region", r.region.is_some()),
        ("endpoint", r.endpoint.is_some()),
        ("anonymous", r.anonymous),
        ("manifest", r.manifest.is_some()),
        ("user", r.user.is_some()),
        ("password_file", r.password_file.is_some()),
        ("ca_file", r.ca_file.is_some()),
        ("follow_redirects", r.follow_redirects),
        ("timeout", r.timeout != d.timeout),
        ("retries", r.retries != d.retries),
    ];
    let (kind, applies): (&str, &[&str]) = match loc {
        None => ("a local source", &[]),
        Some(Location::S3 { .. }) => (
            "s3://",
            &[
                "region",
                "endpoint",
                "anonymous",
                "ca_file",
                "follow_redirects",
                "timeout",
                "retries",
            ],
        ),
        Some(Location::Http { .. }) => (
            "http(s)://",
            &[
                "manifest",
                "ca_file",
                "follow_redirects",
                "timeout",
                "retries",
            ],
        ),
        Some(Location::Caterva2 { .. }) => (
            "caterva2://",
            &[
                "user",
                "password_file",
                "ca_file",
                "follow_redirects",
                "timeout",
                "retries",
            ],
        ),
    };
    let wrong: Vec<&str> = given
        .iter()
        .filter(|(k, set)| *set && !applies.contains(k))
        .map(|(k, _)| *k)
        .collect();
    if wrong.is_empty() {
        return Ok(());
    }
    let whose = |k: &str| match k {
        "region" | "endpoint" | "anonymous" => "s3://",
        "manifest" => "http(s)://",
        "user" | "password_file" => "caterva2://",
        _ => "remote sources",
    };
    let list: Vec<String> = wrong
        .iter()
        .map(|k| format!("{k} ({})", whose(k)))
        .collect();
    Err(format!(
        "option{} {} do{} not apply to {kind}: remove {}",
        if wrong.len() > 1 { "s" } else { "" },
        list.join(", "),
        if wrong.len() > 1 { "" } else { "es" },
        if wrong.len() > 1 { "them" } else { "it" },
    ))
}

/// The error of an option that is not one, naming it only if its name
/// looks like an option's (never its value, which may be a secret; nor a
/// piece of a value cut at a comma).
pub fn unknown_option(k: &str) -> String {
    let plain = k.len() <= 32
        && k.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if plain {
        format!("unknown option '{k}'")
    } else {
        "unknown option (its name is not shown: it may be part of a secret)".into()
    }
}

/// The error of a command-line flag that is not one (`--name=value`): as
/// [`unknown_option`], its value never shown.
pub fn unknown_flag(s: &str) -> String {
    unknown_option(s.split('=').next().unwrap_or(s))
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
    /// Apply `key=value` if it is one of these options: `Ok(false)` if not.
    pub fn apply(&mut self, k: &str, v: Option<&str>) -> Result<bool, String> {
        let need = || v.ok_or_else(|| format!("option {k} needs a value ({k}=...)"));
        let id = |v: &str| {
            v.parse::<u32>()
                .ok()
                .filter(|&n| n != u32::MAX)
                .ok_or_else(|| format!("{k}: not a numeric id: {v}"))
        };
        let mode = |v: &str| match u32::from_str_radix(v, 8) {
            Ok(m) if m & !0o555 == 0 => Ok(m),
            Ok(m) if m & !0o777 == 0 => Err(format!(
                "{k}: {v} has write bits: the mount is read-only (0444, 0440, 0400, 0555, ...)"
            )),
            _ => Err(format!(
                "{k}: not an octal mode of read and execute bits (0444, 0440, 0555, ...): {v}"
            )),
        };
        match k {
            "uid" => self.uid = Some(id(need()?)?),
            "gid" => self.gid = Some(id(need()?)?),
            "file_mode" => self.file_mode = Some(mode(need()?)?),
            "dir_mode" => self.dir_mode = Some(mode(need()?)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Any of them given?
    pub fn any(&self) -> bool {
        *self != Perms::default()
    }
}

/// A file named by an option, made absolute against the directory the
/// command was started in: a daemon reads it later, from `/`.
pub fn path_option(k: &str, v: &str) -> Result<PathBuf, String> {
    std::path::absolute(v).map_err(|e| format!("{k}: {e}: {v:?}"))
}

/// Seconds, with a fraction if wanted (`0.5`), as a duration.
pub fn parse_seconds(k: &str, v: &str) -> Result<Duration, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{k}: not a number of seconds: {v}"))
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

    #[test]
    fn options_that_do_not_apply_to_a_source_are_refused() {
        let loc = |u: &str| Location::parse(u).unwrap().unwrap();
        let with = |k: &str, v: Option<&str>| {
            let mut r = RemoteOptions::default();
            assert!(apply_remote_option(&mut r, k, v).unwrap());
            r
        };
        let c2 = loc("caterva2://h:1/@public");
        let http = loc("http://h/d/");
        let s3 = loc("s3://b/p");
        let e = check_applies(Some(&c2), &with("region", Some("eu-west-1"))).unwrap_err();
        assert_eq!(
            e,
            "option region (s3://) does not apply to caterva2://: remove it"
        );
        for k in ["endpoint", "anonymous", "region"] {
            let v = (k != "anonymous").then_some(if k == "endpoint" { "http://e" } else { "r" });
            assert!(check_applies(Some(&http), &with(k, v)).is_err(), "{k}");
            assert!(check_applies(Some(&c2), &with(k, v)).is_err(), "{k}");
            check_applies(Some(&s3), &with(k, v)).unwrap();
        }
        let m = with("manifest", Some("m.txt"));
        assert!(check_applies(Some(&s3), &m).is_err());
        assert!(check_applies(Some(&c2), &m).is_err());
        check_applies(Some(&http), &m).unwrap();
        for (k, v) in [("user", "u"), ("password_file", "/pw")] {
            assert!(check_applies(Some(&s3), &with(k, Some(v))).is_err(), "{k}");
            assert!(
                check_applies(Some(&http), &with(k, Some(v))).is_err(),
                "{k}"
            );
            check_applies(Some(&c2), &with(k, Some(v))).unwrap();
        }
        let e = check_applies(None, &with("timeout", Some("3"))).unwrap_err();
        assert!(
            e.contains("timeout (remote sources)") && e.contains("a local source"),
            "{e}"
        );
        check_applies(None, &RemoteOptions::default()).unwrap();
        check_applies(Some(&s3), &with("timeout", Some("3"))).unwrap();
    }

    #[test]
    fn an_unknown_option_is_named_only_if_it_looks_like_one() {
        assert_eq!(unknown_option("passwrd"), "unknown option 'passwrd'");
        assert_eq!(unknown_flag("--pass=S3cret"), "unknown option '--pass'");
        for k in ["S3cret", "a b", "x/y", &"x".repeat(33), "pässword"] {
            assert!(!unknown_option(k).contains(k), "{k}");
        }
    }

    #[test]
    fn perms_take_numeric_ids_and_read_only_octal_modes() {
        let mut p = Perms::default();
        assert!(!p.any());
        assert_eq!(p.apply("uid", Some("1000")), Ok(true));
        assert_eq!(p.apply("gid", Some("100")), Ok(true));
        assert_eq!(p.apply("file_mode", Some("0440")), Ok(true));
        assert_eq!(p.apply("dir_mode", Some("550")), Ok(true));
        assert_eq!(p.apply("fsname", Some("x")), Ok(false));
        let want = Perms {
            uid: Some(1000),
            gid: Some(100),
            file_mode: Some(0o440),
            dir_mode: Some(0o550),
        };
        assert_eq!(p, want);
        assert!(p
            .apply("file_mode", Some("0644"))
            .unwrap_err()
            .contains("write bits"));
        assert!(p.apply("dir_mode", Some("4555")).is_err());
        assert!(p.apply("file_mode", Some("9")).is_err());
        assert!(p.apply("uid", Some("alice")).is_err());
        assert!(p.apply("uid", None).is_err());
    }

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
