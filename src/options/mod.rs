//! Every `-o` option in one table, [`OPTIONS`]: its names, its lines in
//! `--help`, whether `cat` and `info` take it, and what it sets. The mount
//! form ([`parse`]) takes them all; `cat` and `info` ([`apply_reading`])
//! those a remote FILE's reading needs. Adding an option is a row here and
//! a paragraph in the man page (`tests/fs/cli.rs` checks that `--help` and
//! the man page name the same options). The values' types and defaults are
//! `crate::config`'s.

use crate::config::{parse_size, MountArgs, VERSION};
use bloscfs_remote::{Location, Options as RemoteOptions};
use std::path::PathBuf;
use std::time::Duration;

/// One option.
pub struct Opt {
    /// Its name and aliases.
    names: &'static [&'static str],
    /// Its lines in `--help` (`""`: shown in another row's, or an alias).
    help: &'static str,
    /// Does it take a value (`name=VALUE`)? Without one it is a flag; a
    /// value given to a flag is ignored.
    value: bool,
    /// Taken by `cat` and `info` (a remote FILE's options).
    reading: bool,
    /// What it does, given its name and value.
    set: fn(&mut MountArgs, &str, &str) -> Result<(), String>,
}

const fn opt(
    names: &'static [&'static str],
    help: &'static str,
    set: fn(&mut MountArgs, &str, &str) -> Result<(), String>,
) -> Opt {
    Opt {
        names,
        help,
        value: true,
        reading: false,
        set,
    }
}

const fn flag(
    names: &'static [&'static str],
    help: &'static str,
    set: fn(&mut MountArgs, &str, &str) -> Result<(), String>,
) -> Opt {
    Opt {
        value: false,
        ..opt(names, help, set)
    }
}

/// An option `cat` and `info` take too.
const fn reading(o: Opt) -> Opt {
    Opt { reading: true, ..o }
}

/// The options, in `--help`'s order.
pub const OPTIONS: &[Opt] = &[
    opt(
        &["cache_size"],
        "  -o cache_size=SIZE     decoded-block cache bound, bytes with K/M/G suffix (default 256M)\n",
        |m, k, v| size(k, v).map(|n| m.fs.cache_size = n),
    ),
    opt(
        &["threads"],
        "  -o threads=N           FUSE worker threads (default: number of CPUs, at least 2;\n\
         \x20                        for a remote source 32, or twice the CPUs if more)\n",
        |m, k, v| {
            m.threads = v
                .parse()
                .ok()
                .filter(|&n: &usize| (1..=256).contains(&n))
                .ok_or_else(|| format!("{k}: not a number from 1 to 256: {v}"))?;
            Ok(())
        },
    ),
    opt(
        &["readahead"],
        "  -o readahead=SIZE      kernel read-ahead for the mount (default 1M; 0 leaves the kernel's)\n",
        |m, k, v| size(k, v).map(|n| m.readahead = n),
    ),
    opt(
        &["max_read"],
        "  -o max_read=SIZE       largest read request the kernel sends (4K to 1M; default 1M)\n",
        |m, k, v| {
            m.max_read = size(k, v)
                .ok()
                .filter(|n| (4096..=1 << 20).contains(n) && n % 4096 == 0)
                .ok_or_else(|| format!("{k}: not a multiple of 4K from 4K to 1M: {v}"))?;
            Ok(())
        },
    ),
    opt(
        &["decode_ahead"],
        "  -o decode_ahead=SIZE   decode this far past each sequential reader on idle CPUs (default auto:\n\
         \x20                        one 4 MiB span per CPU the readers leave idle, from 4 CPUs; 0: off)\n",
        |m, k, v| {
            m.fs.decode_ahead = blosc_decode::DecodeAhead::parse(v, parse_size)
                .ok_or_else(|| format!("{k}: not auto or a size: {v}"))?;
            Ok(())
        },
    ),
    opt(
        &["source_io"],
        "  -o source_io=MODE      auto (default): a cold random block read bypasses the page cache;\n\
         \x20                        buffered: never; direct: always where the file system allows it\n",
        |m, k, v| {
            m.fs.source_io = blosc_decode::io::Access::parse(v)
                .ok_or_else(|| format!("{k}: not one of auto, buffered, direct: {v}"))?;
            Ok(())
        },
    ),
    flag(
        &["uring"],
        "  -o uring               take requests through the kernel's per-CPU FUSE io_uring queues when\n\
         \x20                        it offers them (fuse enable_uring): shorter small reads, slower scans\n",
        |m, _, _| {
            m.uring = true;
            Ok(())
        },
    ),
    flag(
        &["allow_other"],
        "  -o allow_other         let other users read (implies default_permissions)\n",
        |m, _, _| {
            m.allow_other = true;
            m.default_permissions = true;
            Ok(())
        },
    ),
    flag(
        &["allow_root"],
        "  -o allow_root          let root read too\n",
        |m, _, _| {
        m.allow_root = true;
        Ok(())
    },
    ),
    flag(
        &["default_permissions"],
        "  -o default_permissions let the kernel check permissions\n",
        |m, _, _| {
        m.default_permissions = true;
        Ok(())
    },
    ),
    flag(
        &["verify_checksums", "verify"],
        "  -o verify_checksums    verify Bloscpack chunk checksums on first read (default)\n",
        |m, _, _| {
        m.fs.verify_checksums = true;
        Ok(())
    },
    ),
    flag(
        &["noverify", "noverify_checksums"],
        "  -o noverify            do not verify Bloscpack checksums\n",
        |m, _, _| {
        m.fs.verify_checksums = false;
        Ok(())
    },
    ),
    flag(
        &["xattr"],
        "  -o xattr               serve extended attributes (user.blosc.*, user.zarr.*,\n\
         \x20                        user.bloscfs.stats); `ls -l` then asks two of every entry (default: off)\n",
        |m, _, _| {
        m.xattr = true;
        Ok(())
    },
    ),
    flag(&["noxattr"], "", |m, _, _| {
        m.xattr = false;
        Ok(())
    }),
    opt(
        &["logfile"],
        "  -o logfile=PATH        log to PATH instead of syslog when daemonized\n",
        |m, k, v| path(k, v).map(|p| m.logfile = Some(p)),
    ),
    opt(
        &["fsname"],
        "  -o fsname=NAME         source name shown in mount tables (default: SOURCE)\n",
        |m, _, v| {
        m.fsname = Some(v.to_string());
        Ok(())
    },
    ),
    opt(
        &["subtype"],
        "  -o subtype=NAME        file system subtype (default: bloscfs)\n",
        |m, _, v| {
        m.subtype = v.to_string();
        Ok(())
    },
    ),
    flag(
        &["auto_unmount"],
        "  -o auto_unmount        unmount when the daemon dies (implies allow_root)\n",
        |m, _, _| {
        m.auto_unmount = true;
        Ok(())
    },
    ),
    // Shown with -d.
    flag(&["debug"], "", |m, _, _| {
        m.debug = true;
        m.foreground = true;
        Ok(())
    }),
    reading(opt(
        &["region"],
        "Remote sources:\n\
         \x20 -o region=NAME         S3 region (default: from the AWS environment, else us-east-1)\n",
        |m, k, v| {
            bloscfs_remote::check_region(k, v)?;
            m.remote.region = Some(v.to_string());
            Ok(())
        },
    )),
    reading(opt(
        &["endpoint"],
        "  -o endpoint=URL        S3 endpoint of another store (MinIO, Ceph: http://host:9000)\n",
        |m, k, v| {
            bloscfs_remote::check_endpoint(k, v)?;
            m.remote.endpoint = Some(v.to_string());
            Ok(())
        },
    )),
    reading(flag(
        &["anonymous"],
        "  -o anonymous           do not sign S3 requests (public buckets)\n",
        |m, _, _| {
        m.remote.anonymous = true;
        Ok(())
    },
    )),
    reading(opt(
        &["manifest"],
        "  -o manifest=NAME       HTTP: the listing file under the URL (SIZE PATH per line)\n",
        |m, _, v| {
        m.remote.manifest = Some(v.to_string());
        Ok(())
    },
    )),
    // fstab's `user` has no value (a row below); `user=NAME` is Caterva2's.
    reading(opt(
        &["user"],
        "  -o user=NAME           Caterva2: log in as NAME ...\n",
        |m, _, v| {
        m.remote.user = Some(v.to_string());
        Ok(())
    },
    )),
    reading(opt(
        &["password_file"],
        "  -o password_file=PATH  ... with the password in PATH\n",
        |m, k, v| path(k, v).map(|p| m.remote.password_file = Some(p)),
    )),
    reading(opt(
        &["ca_file"],
        "  -o ca_file=PATH        HTTPS: also trust the certificate authorities in PATH (PEM)\n",
        |m, k, v| path(k, v).map(|p| m.remote.ca_file = Some(p)),
    )),
    reading(flag(
        &["follow_redirects"],
        "  -o follow_redirects    S3, Caterva2: follow redirects to the same scheme, host and port\n\
         \x20                        (never to another; plain HTTP sources always follow those)\n",
        |m, _, _| {
        m.remote.follow_redirects = true;
        Ok(())
    },
    )),
    opt(
        &["uid"],
        "  -o uid=N, gid=N        owner of every file and directory shown (default: the mounting user)\n",
        |m, k, v| id(k, v).map(|n| m.perms.uid = Some(n)),
    ),
    opt(&["gid"], "", |m, k, v| id(k, v).map(|n| m.perms.gid = Some(n))),
    opt(
        &["file_mode"],
        "  -o file_mode=MODE      mode of files, octal, no write bits (default 0444)\n",
        |m, k, v| mode(k, v).map(|n| m.perms.file_mode = Some(n)),
    ),
    opt(
        &["dir_mode"],
        "  -o dir_mode=MODE       mode of directories (default 0555); with allow_other, these\n\
         \x20                        decide which local users read what the store's credentials reach\n",
        |m, k, v| mode(k, v).map(|n| m.perms.dir_mode = Some(n)),
    ),
    reading(opt(
        &["timeout"],
        "  -o timeout=SECS        limit of one request, retried before it fails (default 10)\n",
        |m, k, v| seconds(k, v).map(|d| m.remote.timeout = d),
    )),
    reading(opt(
        &["retries"],
        "  -o retries=N           retries of a failed request, with backoff (default 3)\n",
        |m, k, v| {
            m.remote.retries = v
                .parse()
                .ok()
                .filter(|&n: &u32| n <= 10)
                .ok_or_else(|| format!("{k}: not a number from 0 to 10: {v}"))?;
            Ok(())
        },
    )),
    reading(opt(
        &["fetch_cache"],
        "  -o fetch_cache=SIZE    the part of cache_size for fetched compressed bytes and\n\
         \x20                        read-ahead (default a quarter)\n",
        |m, k, v| {
            let n = size(k, v)?;
            m.fetch_cache = Some(n);
            m.remote.page_cache = n;
            Ok(())
        },
    )),
    opt(
        &["metadata_ttl"],
        "  -o metadata_ttl=SECS   how long a listing answers stats (default 1)\n",
        |m, k, v| seconds(k, v).map(|d| m.metadata_ttl = d),
    ),
    flag(
        &[
            "ro", "nodev", "nosuid", "noexec", "noatime", "dev", "suid", "exec", "atime",
        ],
        "  -o ro, nodev, nosuid, noexec, noatime, dev, suid, exec, atime\n\
         \x20                        passed to the kernel (the mount is always read-only)\n",
        |m, k, _| {
        m.flags.push(k.to_string());
        Ok(())
    },
    ),
    flag(
        &[
            "rw", "defaults", "auto", "noauto", "user", "users", "nouser", "nofail", "_netdev",
            "owner", "comment",
        ],
        "  -o rw, defaults, auto, noauto, user, users, nouser, nofail, _netdev, x-*\n\
         \x20                        accepted for fstab and ignored\n",
        |_, _, _| Ok(()),
    ),
];

/// The text of `bloscfs --help`.
pub fn usage() -> String {
    let mut s = String::from(USAGE_HEAD);
    for o in OPTIONS {
        s.push_str(o.help);
    }
    s
}

const USAGE_HEAD: &str = "\
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
                print!("{}", usage());
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
                return Err(format!("{}\n\n{}", unknown_flag(s), usage()));
            }
            s => pos.push(s.to_string()),
        }
    }
    for o in opts.iter().flat_map(|o| split(o)) {
        apply(&mut m, o, false)?;
    }
    if pos.len() != 2 {
        return Err(format!("expected SOURCE and MOUNTPOINT\n\n{}", usage()));
    }
    m.source = PathBuf::from(&pos[0]);
    m.location = Location::parse(&pos[0]).transpose()?;
    check_applies(m.location.as_ref(), &m.remote)?;
    if m.location.is_none() && m.perms.any() {
        return Err("uid, gid, file_mode and dir_mode are for remote sources: a local directory shows its files' own owners and modes".into());
    }
    m.mountpoint = PathBuf::from(&pos[1]);
    Ok(Some(m))
}

/// Apply `-o` options (comma-separated) of a remote FILE that `cat` or
/// `info` reads to `r`.
pub fn apply_reading(r: &mut RemoteOptions, list: &str) -> Result<(), String> {
    let mut m = MountArgs {
        remote: r.clone(),
        ..MountArgs::default()
    };
    for o in split(list) {
        apply(&mut m, o, true)?;
    }
    *r = m.remote;
    Ok(())
}

/// The options of a comma-separated list.
fn split(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').filter(|o| !o.is_empty())
}

/// Apply option `o` (`key` or `key=value`) to `m`; `reading`: only the
/// options `cat` and `info` take.
fn apply(m: &mut MountArgs, o: &str, reading: bool) -> Result<(), String> {
    let (k, v) = match o.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (o, None),
    };
    if k.starts_with("x-") && !reading {
        return Ok(()); // fstab's comments
    }
    let named = || {
        OPTIONS
            .iter()
            .filter(|o| o.names.contains(&k) && (o.reading || !reading))
    };
    // A row of the form given wins (`user=NAME` against fstab's `user`).
    let Some(row) = named()
        .find(|o| o.value == v.is_some())
        .or_else(|| named().next())
    else {
        return Err(format!("{} (see bloscfs --help)", unknown_option(k)));
    };
    match (row.value, v) {
        (true, None) => Err(format!("option {k} needs a value ({k}=...)")),
        (true, Some(v)) => (row.set)(m, k, v),
        (false, _) => (row.set)(m, k, ""),
    }
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
    const ANY: [&str; 4] = ["ca_file", "follow_redirects", "timeout", "retries"];
    let (kind, only): (&str, &[&str]) = match loc {
        None => ("a local source", &[]),
        Some(Location::S3 { .. }) => ("s3://", &["region", "endpoint", "anonymous"]),
        Some(Location::Http { .. }) => ("http(s)://", &["manifest"]),
        Some(Location::Caterva2 { .. }) => ("caterva2://", &["user", "password_file"]),
    };
    let applies = |k: &str| loc.is_some() && ANY.contains(&k) || only.contains(&k);
    let wrong: Vec<&str> = given
        .iter()
        .filter(|(k, set)| *set && !applies(k))
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
    let many = wrong.len() > 1;
    Err(format!(
        "option{} {} do{} not apply to {kind}: remove {}",
        if many { "s" } else { "" },
        list.join(", "),
        if many { "" } else { "es" },
        if many { "them" } else { "it" },
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

/// A size with an optional K/M/G/T suffix.
fn size(k: &str, v: &str) -> Result<u64, String> {
    parse_size(v).ok_or_else(|| format!("{k}: not a size: {v}"))
}

/// A file named by an option, made absolute against the directory the
/// command was started in: a daemon reads it later, from `/`.
fn path(k: &str, v: &str) -> Result<PathBuf, String> {
    std::path::absolute(v).map_err(|e| format!("{k}: {e}: {v:?}"))
}

/// Seconds, with a fraction if wanted (`0.5`), as a duration.
fn seconds(k: &str, v: &str) -> Result<Duration, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{k}: not a number of seconds: {v}"))
}

/// A numeric user or group id.
fn id(k: &str, v: &str) -> Result<u32, String> {
    v.parse::<u32>()
        .ok()
        .filter(|&n| n != u32::MAX)
        .ok_or_else(|| format!("{k}: not a numeric id: {v}"))
}

/// An octal mode of read and execute bits.
fn mode(k: &str, v: &str) -> Result<u32, String> {
    match u32::from_str_radix(v, 8) {
        Ok(m) if m & !0o555 == 0 => Ok(m),
        Ok(m) if m & !0o777 == 0 => Err(format!(
            "{k}: {v} has write bits: the mount is read-only (0444, 0440, 0400, 0555, ...)"
        )),
        _ => Err(format!(
            "{k}: not an octal mode of read and execute bits (0444, 0440, 0555, ...): {v}"
        )),
    }
}

#[cfg(test)]
mod tests;
