//! Command-line entry points: `bloscfs cat`, `bloscfs info`, and the mount form.

use crate::fs::{RemoteTree, SourceTree};
use blosc_decode::container::{Container, Env};
use blosc_decode::error::Error;
use blosc_decode::open::open_source;
use bloscfs_remote::{Entry, Location, Options as RemoteOptions, Remote};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::config::{parse_size, VERSION};

/// What `cat` and `info` read: a local file, or a remote one (with the
/// store, whose request counts `--stats` prints).
struct Target {
    container: Container,
    remote: Option<Remote>,
}

/// Open FILE, a path or a remote URL, as a container.
fn open_target(file: &Path, remote: &RemoteOptions, env: &Env) -> Result<Target, String> {
    let url = file.to_string_lossy();
    let Some(loc) = Location::parse(&url) else {
        crate::options::check_applies(None, remote)?;
        return open_or_fail(file, env).map(|container| Target {
            container,
            remote: None,
        });
    };
    let loc = loc?;
    crate::options::check_applies(Some(&loc), remote)?;
    let r = Remote::connect(loc, remote.clone()).map_err(|e| format!("{url}: {e}"))?;
    let entry = r.stat("").map_err(|e| format!("{url}: {e}"))?;
    let dir = entry == Entry::Dir;
    let opened = match entry {
        Entry::Object(o) => {
            let src = r.open(&o);
            src.prefetch_open()
                .and_then(|()| open_source(src, file, env))
        }
        // A sparse frame: a prefix holding chunks.b2frame.
        Entry::Dir => {
            let tree = RemoteTree::new(r.clone(), &url, Duration::from_secs(60));
            let root = tree.root().to_path_buf();
            let md = tree.stat(&root).map_err(|e| format!("{url}: {e}"))?;
            tree.open_container(&root, &md, env)
        }
    };
    match opened {
        Ok(Some(container)) => Ok(Target {
            container,
            remote: Some(r),
        }),
        Ok(None) => Err(not_a_container(file, dir)),
        Err(e) => Err(e.in_file(file).to_string()),
    }
}

/// Why `path` (a directory if `dir`) is not read.
fn not_a_container(path: &Path, dir: bool) -> String {
    if dir {
        return format!(
            "{}: a directory, not a sparse frame (no chunks.b2frame in it)",
            path.display()
        );
    }
    format!(
        "{}: not a Blosc container (no Blosc1/Blosc2 chunk, frame, sparse frame, packed super-chunk or Bloscpack header found)",
        path.display()
    )
}

/// Print a remote store's request counts to stderr (`--stats`).
fn print_stats(remote: Option<&Remote>) {
    if let Some(r) = remote {
        let s = r.stats();
        eprintln!(
            "bloscfs: requests: gets={} lists={} bytes={} retries={} errors={}",
            s.gets, s.lists, s.bytes, s.retries, s.errors
        );
    }
}

fn open_or_fail(path: &Path, env: &Env) -> Result<Container, String> {
    let opened = match in_store(path) {
        Some(abs) => open_member(&abs, env),
        None => crate::local::open_path(path, env),
    };
    match opened {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(match blosc_decode::detect::carrier_path(path) {
            Some(k) => format!(
                "{}: python-blosc2 {k}: holds no data of its own; passed through raw",
                path.display()
            ),
            None => not_a_container(path, path.is_dir()),
        }),
        Err(e) => Err(e.in_file(path).to_string()),
    }
}

/// `path` made absolute, if it leads through a `.b2z` or `.b2e` store (a
/// member, a key), or to a key embedded in a `.b2d` store.
fn in_store(path: &Path) -> Option<PathBuf> {
    let abs = std::path::absolute(path).ok()?;
    let parent = abs.parent()?;
    let store = |a: &Path| {
        let name = a.as_os_str().as_encoded_bytes();
        ((name.ends_with(b".b2z") || name.ends_with(b".b2e")) && a.is_file())
            || (name.ends_with(b".b2d") && a.is_dir() && !abs.exists())
    };
    parent.ancestors().any(store).then_some(abs)
}

/// Open the store member at `abs` as the mount would.
fn open_member(abs: &Path, env: &Env) -> blosc_decode::Result<Option<Container>> {
    let local = std::sync::Arc::new(crate::fs::LocalTree::new(PathBuf::from("/")));
    let tree = crate::fs::StoreTree::new(local, env.clone());
    let md = tree.stat(abs).map_err(Error::from)?;
    tree.open_container(abs, &md, env)
}

pub const CAT_USAGE: &str =
    "usage: bloscfs cat [-o OPTIONS] [--offset N] [--length N] [--raw] [--no-verify] [--stats] FILE";

/// What `bloscfs cat` was asked for.
struct CatArgs {
    file: PathBuf,
    offset: u64,
    length: Option<u64>,
    verify: bool,
    raw: bool,
    stats: bool,
    remote: RemoteOptions,
}

/// Parse `cat`'s arguments (`Ok(None)`: help was printed).
fn parse_cat(args: &[String]) -> Result<Option<CatArgs>, String> {
    let mut offset = 0u64;
    let mut length: Option<u64> = None;
    let mut file: Option<PathBuf> = None;
    let mut verify = true;
    let mut raw = false;
    let mut stats = false;
    let mut remote = RemoteOptions::default();
    let mut it = args.iter();
    let size =
        |name: &str, v: &str| parse_size(v).ok_or_else(|| format!("{name}: not a size: {v}"));
    while let Some(a) = it.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            let v = it
                .next()
                .ok_or_else(|| format!("{name} needs a value\n{CAT_USAGE}"))?;
            size(name, v)
        };
        match a.as_str() {
            "--offset" => offset = value("--offset")?,
            // `-o N` (a number) is the offset, as it always was.
            "-o" => {
                let v = it
                    .next()
                    .ok_or_else(|| format!("-o needs a value\n{CAT_USAGE}"))?;
                match parse_size(v) {
                    Some(n) => offset = n,
                    None => crate::options::apply_reading(&mut remote, v)?,
                }
            }
            "--stats" => stats = true,
            "--length" | "-n" => length = Some(value("--length")?),
            "--no-verify" => verify = false,
            "--raw" => raw = true,
            "-h" | "--help" => {
                println!(
                    "{CAT_USAGE}\nWrites the uncompressed bytes of FILE (or the window given) to stdout.\n\
                     --raw: for arrays, the stored chunk content instead of the .npy file\n\
                     (for a Zarr array directory, its C-order values).\n\
                     --no-verify: do not verify Bloscpack checksums.\n\
                     -o OPTIONS: a remote FILE's options (see bloscfs --help).\n\
                     --stats: print a remote FILE's request counts to stderr."
                );
                return Ok(None);
            }
            s if s.starts_with("--offset=") => offset = size("--offset", &s[9..])?,
            s if s.starts_with("--length=") => length = Some(size("--length", &s[9..])?),
            s if s.starts_with('-') && s.len() > 1 => {
                let e = crate::options::unknown_flag(s);
                return Err(format!("{e}\n{CAT_USAGE}"));
            }
            s => {
                if file.replace(PathBuf::from(s)).is_some() {
                    return Err(format!("cat takes one FILE\n{CAT_USAGE}"));
                }
            }
        }
    }
    let file = file.ok_or_else(|| format!("missing FILE\n{CAT_USAGE}"))?;
    Ok(Some(CatArgs {
        file,
        offset,
        length,
        verify,
        raw,
        stats,
        remote,
    }))
}

/// `bloscfs cat`: write uncompressed bytes to stdout.
pub fn cmd_cat(args: &[String]) -> Result<(), String> {
    let Some(a) = parse_cat(args)? else {
        return Ok(());
    };
    if let Some(dir) = zarr_dir(&a.file) {
        return cat_zarr(&dir, &a);
    }
    if let Some(t) = crate::fs::table_cli::table_at(&a.file) {
        return crate::fs::table_cli::cat(t?, &a.file, a.offset, a.length);
    }
    // Windows are decoded on all CPUs below: no decode-ahead pool.
    let mut env = Env::new(64 << 20);
    env.verify_checksums = a.verify;
    let Target {
        container: mut c,
        remote,
    } = open_target(&a.file, &a.remote, &env)?;
    if a.raw {
        c = c
            .with_view(blosc_decode::container::View::Raw)
            .map_err(|e| e.to_string())?;
    }
    let end = match a.length {
        Some(l) => a.offset.saturating_add(l).min(c.len()),
        None => c.len(),
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    write_range(&c, a.offset.min(end), end, &mut out)?;
    out.flush().map_err(|e| format!("writing stdout: {e}"))?;
    if a.stats {
        print_stats(remote.as_ref());
    }
    Ok(())
}

/// Write bytes `start..end` of `c` to `out`, decoding windows on all CPUs
/// and writing them in order. Worker k decodes windows k, k + threads, ...
/// for the whole run (its scratch buffers live as long as it does) into one
/// of two buffers it owns: one is being written while the next is decoded.
/// A reader that goes away (a broken pipe) ends it quietly.
fn write_range(c: &Container, start: u64, end: u64, out: &mut impl Write) -> Result<(), String> {
    // Up to 32: two 4 MiB buffers each, 256 MiB at most.
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 32);
    let win = 4u64 << 20;
    let windows = (end - start).div_ceil(win);
    type Done = (Vec<u8>, Result<usize, Error>);
    std::thread::scope(|sc| -> Result<(), String> {
        let mut workers = Vec::new();
        for k in 0..threads as u64 {
            let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<Done>(1);
            let (free_tx, free_rx) = std::sync::mpsc::channel::<Vec<u8>>();
            for _ in 0..2 {
                let _ = free_tx.send(Vec::new());
            }
            sc.spawn(move || {
                for w in (k..windows).step_by(threads) {
                    let Ok(mut b) = free_rx.recv() else { return };
                    let at = start + w * win;
                    let n = (end - at).min(win) as usize;
                    b.resize(n, 0);
                    let r = c.read_at(at, &mut b);
                    if done_tx.send((b, r)).is_err() {
                        return; // writing stopped
                    }
                }
            });
            workers.push((done_rx, free_tx));
        }
        for w in 0..windows {
            let (done, free) = &workers[(w % threads as u64) as usize];
            let (b, r) = done
                .recv()
                .map_err(|_| "decoder thread failed".to_string())?;
            let got = r.map_err(|e| e.to_string())?;
            if let Err(e) = out.write_all(&b[..got]) {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    return Ok(());
                }
                return Err(format!("writing stdout: {e}"));
            }
            if got < b.len() {
                break; // the container ended early
            }
            let _ = free.send(b);
        }
        Ok(())
    })
}

pub const INFO_USAGE: &str = "usage: bloscfs info [-o OPTIONS] [--chunks] [--stats] FILE";

/// `bloscfs info`: describe a container.
pub fn cmd_info(args: &[String]) -> Result<(), String> {
    let mut chunks = false;
    let mut stats = false;
    let mut remote = RemoteOptions::default();
    let mut file: Option<PathBuf> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--chunks" | "-c" => chunks = true,
            "--stats" => stats = true,
            "-o" => {
                let v = it
                    .next()
                    .ok_or_else(|| format!("-o needs a value\n{INFO_USAGE}"))?;
                crate::options::apply_reading(&mut remote, v)?;
            }
            "-h" | "--help" => {
                println!("{INFO_USAGE}\nShows the structure of a Blosc container; --chunks adds one line per chunk.");
                return Ok(());
            }
            s if s.starts_with('-') && s.len() > 1 => {
                let e = crate::options::unknown_flag(s);
                return Err(format!("{e}\n{INFO_USAGE}"));
            }
            s => {
                if file.replace(PathBuf::from(s)).is_some() {
                    return Err(format!("info takes one FILE\n{INFO_USAGE}"));
                }
            }
        }
    }
    let file = file.ok_or_else(|| format!("missing FILE\n{INFO_USAGE}"))?;
    if let Some(text) = crate::report::render_carrier(&file) {
        print!("{text}");
        return Ok(());
    }
    if let Some(dir) = zarr_dir(&file) {
        return info_zarr(&dir);
    }
    if let Some(t) = crate::fs::table_cli::table_at(&file) {
        print!("{}", crate::fs::table_cli::info(t?, &file));
        return Ok(());
    }
    let env = Env::new(16 << 20);
    let t = open_target(&file, &remote, &env)?;
    print!("{}", crate::report::render_info(&t.container, chunks));
    if stats {
        print_stats(t.remote.as_ref());
    }
    Ok(())
}

/// `path`, if it is a local Zarr array's directory (holding `.zarray` or
/// `zarr.json`).
fn zarr_dir(path: &Path) -> Option<PathBuf> {
    if Location::parse(&path.to_string_lossy()).is_some() || !path.is_dir() {
        return None;
    }
    [bloscfs_zarr::ZARRAY, bloscfs_zarr::ZARR_JSON]
        .iter()
        .any(|f| path.join(f).is_file())
        .then(|| path.to_path_buf())
}

/// The Zarr array at `dir`, its chunks decoded on all CPUs (the chunks a
/// read crosses in parallel; the pool's threads start on the first read).
fn open_zarr(dir: &Path) -> Result<bloscfs_zarr::ZarrArray, String> {
    let store = std::sync::Arc::new(bloscfs_zarr::DirStore::new(dir));
    let pool = std::sync::Arc::new(bloscfs_pool::Pool::per_cpu());
    let env = Env::with_runner(bloscfs_zarr::array::CACHE_BYTES, pool);
    bloscfs_zarr::ZarrArray::open_with(store, env)
        .map_err(|e| format!("{}: Zarr array not read: {e}", dir.display()))
}

/// `bloscfs cat` of a Zarr array: its `.npy` file (`--raw`: the C-order
/// values alone), or the window asked of it.
fn cat_zarr(dir: &Path, a: &CatArgs) -> Result<(), String> {
    let z = open_zarr(dir)?;
    let (skip, len) = match a.raw {
        true => (z.npy_header().len() as u64, z.meta().data_bytes()),
        false => (0, z.npy_len()),
    };
    write_window(a.offset, a.length, len, |at, buf| {
        z.read_npy_at(skip + at, buf)
            .map_err(|e| format!("{}: {e}", dir.display()))
    })
}

/// Write bytes `offset..offset + length` (cut at `len`) to stdout, each
/// piece of up to 4 MiB from `read` (given an offset and a buffer); a
/// short read ends it, and a closed pipe is no error.
pub fn write_window(
    offset: u64,
    length: Option<u64>,
    len: u64,
    mut read: impl FnMut(u64, &mut [u8]) -> Result<usize, String>,
) -> Result<(), String> {
    let end = length.map_or(len, |l| offset.saturating_add(l).min(len));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut buf = vec![0u8; (4 << 20).min(end.saturating_sub(offset)) as usize];
    let mut at = offset.min(end);
    while at < end {
        let n = ((end - at) as usize).min(buf.len());
        let got = read(at, &mut buf[..n])?;
        match out.write_all(&buf[..got]) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            r => r.map_err(|e| format!("writing stdout: {e}"))?,
        }
        if got < n {
            break;
        }
        at += got as u64;
    }
    out.flush().map_err(|e| format!("writing stdout: {e}"))
}

/// `bloscfs info` of a Zarr array.
fn info_zarr(dir: &Path) -> Result<(), String> {
    let z = open_zarr(dir)?;
    let m = z.meta();
    let dims = |d: &[u64]| {
        let v: Vec<String> = d.iter().map(u64::to_string).collect();
        format!("({})", v.join(", "))
    };
    println!("{}: Zarr v{} array", dir.display(), m.zarr_format);
    println!("  shape: {}", dims(&m.shape));
    println!("  dtype: {}", m.dtype.typestr());
    println!(
        "  chunks: {} ({} bytes each)",
        dims(&m.chunks),
        m.chunk_bytes()
    );
    for (i, s) in m.shard.iter().flat_map(|s| s.levels()).enumerate() {
        println!(
            "  {}: {} of {} inner chunks, index at the {}{}{}",
            if i == 0 { "shards" } else { "inner shards" },
            dims(&s.shape),
            dims(&s.per),
            s.location(),
            if s.index_big { ", big-endian" } else { "" },
            if s.index_crc { ", crc32c" } else { "" },
        );
    }
    println!("  fill value: {}", m.fill_text);
    for c in &m.codec_names {
        println!("  codec: {c}");
    }
    println!("  presented as .npy: {} bytes", z.npy_len());
    Ok(())
}
