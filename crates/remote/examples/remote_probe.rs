//! Read a remote location by hand and count the requests it costs.
//!
//! ```text
//! remote_probe list  URL [DIR]
//! remote_probe stat  URL KEY
//! remote_probe cat   URL KEY [OFFSET LEN]   # decoded bytes to stdout
//! remote_probe scan  URL KEY [BUF]          # sequential read of all decoded bytes
//! remote_probe random URL KEY N             # N cold random 4 KiB reads
//! remote_probe pin   URL KEY SHELL-COMMAND  # open, read, run the command, read
//! remote_probe par   URL KEY LOCAL T N      # T threads x N random reads, compared
//! ```
//! Options from the environment: `REMOTE_ENDPOINT`, `REMOTE_REGION`,
//! `REMOTE_ANONYMOUS=1`, `REMOTE_MANIFEST`, `REMOTE_USER`,
//! `REMOTE_PASSWORD_FILE`, `REMOTE_SPAN_CACHE` (bytes).

use blosc_decode::{open_source, Env};
use bloscfs_remote::{Entry, Location, Options, Remote, Stats};
use std::io::Write;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn opts() -> Options {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut o = Options {
        endpoint: var("REMOTE_ENDPOINT"),
        region: var("REMOTE_REGION"),
        anonymous: var("REMOTE_ANONYMOUS").is_some(),
        manifest: var("REMOTE_MANIFEST"),
        user: var("REMOTE_USER"),
        password_file: var("REMOTE_PASSWORD_FILE").map(Into::into),
        ..Options::default()
    };
    if let Some(n) = var("REMOTE_SPAN_CACHE").and_then(|v| v.parse().ok()) {
        o.page_cache = n;
    }
    o
}

fn delta(a: Stats, b: Stats) -> String {
    format!(
        "gets {} lists {} bytes {} retries {} errors {}",
        b.gets - a.gets,
        b.lists - a.lists,
        b.bytes - a.bytes,
        b.retries - a.retries,
        b.errors - a.errors
    )
}

type R<T> = Result<T, Box<dyn std::error::Error>>;

fn run() -> R<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cmd, url) = match (args.first(), args.get(1)) {
        (Some(c), Some(u)) => (c.as_str(), u.as_str()),
        _ => return Err("usage: remote_probe list|stat|cat|scan|random URL ...".into()),
    };
    let loc = Location::parse(url).ok_or("not a remote URL")??;
    let remote = Remote::connect(loc, opts())?;
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let t0 = remote.stats();
    match cmd {
        "list" => {
            let l = remote.list(arg(2))?;
            for d in &l.dirs {
                println!("dir  {d}/");
            }
            for o in &l.objects {
                println!("obj  {} {} {:?}", o.key, o.len, o.etag);
            }
        }
        "stat" => println!("{:?}", remote.stat(arg(2))?),
        "pin" => {
            let Entry::Object(obj) = remote.stat(arg(2))? else {
                return Err("a directory".into());
            };
            let src = remote.open(&obj);
            let mut first = vec![0; 100];
            blosc_decode::io::Source::read_exact_at(&*src, 0, &mut first)?;
            std::process::Command::new("sh")
                .arg("-c")
                .arg(arg(3))
                .status()?;
            let mut buf = vec![0; 4096];
            let r = blosc_decode::io::Source::read_exact_at(&*src, obj.len / 2, &mut buf);
            println!("read of the opened version after the command: {r:?}");
            let Entry::Object(now) = remote.stat(arg(2))? else {
                return Err("a directory".into());
            };
            let r =
                blosc_decode::io::Source::read_exact_at(&*remote.open(&now), now.len / 2, &mut buf);
            println!(
                "read of a fresh open: {:?} ({} bytes, {:?})",
                r.map(|_| ()),
                now.len,
                now.etag
            );
        }
        "cat" | "scan" | "random" | "par" => {
            let Entry::Object(obj) = remote.stat(arg(2))? else {
                return Err("a directory".into());
            };
            let t1 = remote.stats();
            eprintln!("stat: {}", delta(t0, t1));
            let src = remote.open(&obj);
            src.prefetch_open()?;
            let c = open_source(src.clone(), arg(2).as_ref(), &Env::default())?
                .ok_or("not a Blosc container")?;
            let t2 = remote.stats();
            eprintln!("open ({} bytes -> {}): {}", obj.len, c.len(), delta(t1, t2));
            match cmd {
                "cat" => {
                    let off: u64 = arg(3).parse().unwrap_or(0);
                    let len: u64 = arg(4).parse().unwrap_or(c.len() - off.min(c.len()));
                    let mut buf = vec![0; len as usize];
                    c.read_at(off, &mut buf)?;
                    std::io::stdout().write_all(&buf)?;
                }
                "scan" => {
                    let bs: usize = arg(3).parse().unwrap_or(1 << 20);
                    let mut buf = vec![0; bs];
                    let (mut off, mut h) = (0u64, 0xcbf29ce484222325u64);
                    let t = std::time::Instant::now();
                    while off < c.len() {
                        let n = bs.min((c.len() - off) as usize);
                        c.read_at(off, &mut buf[..n])?;
                        for &b in &buf[..n] {
                            h = (h ^ b as u64).wrapping_mul(0x100000001b3);
                        }
                        off += n as u64;
                    }
                    let s = t.elapsed().as_secs_f64();
                    let t3 = remote.stats();
                    println!("fnv1a {h:016x} of {off} bytes");
                    eprintln!("scan {:.1} MB/s: {}", off as f64 / s / 1e6, delta(t2, t3));
                }
                "par" => {
                    let local = blosc_decode::open_path(arg(3).as_ref())?.ok_or("local?")?;
                    par(&c, &local, arg(4).parse()?, arg(5).parse()?)?;
                    eprintln!("par: {}", delta(t2, remote.stats()));
                }
                _ => random(&remote, &c, arg(3).parse().unwrap_or(20))?,
            }
        }
        _ => return Err(format!("unknown command {cmd}").into()),
    }
    eprintln!("total: {}", delta(t0, remote.stats()));
    Ok(())
}

fn random(remote: &Remote, c: &blosc_decode::container::Container, n: u64) -> R<()> {
    let mut x = 0x9E3779B97F4A7C15u64;
    let mut buf = vec![0; 4096];
    let mut per = Vec::new();
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = x % c.len().saturating_sub(4096).max(1);
        let a = remote.stats();
        let t = std::time::Instant::now();
        c.read_at(off, &mut buf[..4096.min(c.len() as usize)])?;
        let b = remote.stats();
        per.push((b.gets - a.gets, t.elapsed().as_micros()));
    }
    let gets: Vec<u64> = per.iter().map(|p| p.0).collect();
    let mut us: Vec<u128> = per.iter().skip(2).map(|p| p.1).collect();
    us.sort_unstable();
    let p50 = us.get(us.len() / 2).copied().unwrap_or(0);
    eprintln!("random 4 KiB reads, GETs each: {gets:?}; p50 after the first two {p50} us");
    Ok(())
}

/// `threads` threads each read `n` random ranges of `remote` and `local`
/// (up to 1 MiB, at random offsets) and compare them.
fn par(
    remote: &blosc_decode::container::Container,
    local: &blosc_decode::container::Container,
    threads: u64,
    n: u64,
) -> R<()> {
    assert_eq!(remote.len(), local.len());
    let len = remote.len();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<u64, String> {
                    let mut x = 0x9E3779B97F4A7C15u64 ^ ((t + 1) * 0x1234567);
                    let (mut a, mut b) = (vec![0; 1 << 20], vec![0; 1 << 20]);
                    for i in 0..n {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let off = x % len;
                        let l = ((x >> 40) % (1 << 20)).min(len - off) as usize;
                        // Every 4th thread reads sequentially.
                        let off = if t % 4 == 0 {
                            (i * (1 << 20)) % len
                        } else {
                            off
                        };
                        let l = l.min((len - off) as usize);
                        remote
                            .read_at(off, &mut a[..l])
                            .map_err(|e| e.to_string())?;
                        local.read_at(off, &mut b[..l]).map_err(|e| e.to_string())?;
                        if a[..l] != b[..l] {
                            return Err(format!("thread {t}: bytes differ at {off} +{l}"));
                        }
                    }
                    Ok(n)
                })
            })
            .collect();
        let mut total = 0;
        for h in hs {
            total += h.join().map_err(|_| "panic")??;
        }
        eprintln!("par: {total} reads compared equal");
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
