//! Every fixture written by the reference producers (scripts/fixtures/gen_fixtures.py)
//! and by older releases of every producer (scripts/compat/gen_compat.py) must be
//! presented byte-exact: whole, read in odd-sized pieces, and at random
//! windows. The committed small matrices live in tests/fixtures and
//! tests/fixtures/compat/*; CI also runs the full matrices from
//! $BLOSCFS_FIXTURES (a ':'-separated list of directories, each holding a
//! manifest.json or subdirectories that do).

use blosc_decode::io::Access;
use blosc_decode::Env;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

struct Fixture {
    path: PathBuf,
    kind: String,
    expect: String,
    len: u64,
    sha256: String,
    /// Who wrote it (the compat matrix names the release), for the counts.
    producer: String,
    params: String,
}

fn load(dir: &Path) -> Vec<Fixture> {
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap_or_else(|e| {
        panic!(
            "{}: no manifest.json ({e}); run scripts/fixtures/gen_fixtures.py or scripts/compat/compat.sh",
            dir.display()
        )
    });
    let v: serde_json::Value = serde_json::from_str(&text).expect("manifest is JSON");
    let fixture = |f: &serde_json::Value, undecodable: bool| Fixture {
        path: dir.join(f["path"].as_str().unwrap()),
        kind: f["kind"].as_str().unwrap().to_string(),
        expect: if undecodable {
            "undecodable".to_string()
        } else {
            f["expect"].as_str().unwrap().to_string()
        },
        len: f[if undecodable { "written_len" } else { "len" }]
            .as_u64()
            .unwrap_or(0),
        sha256: f[if undecodable {
            "written_sha256"
        } else {
            "sha256"
        }]
        .as_str()
        .unwrap_or("")
        .to_string(),
        producer: f["params"]["producer"]
            .as_str()
            .unwrap_or("reference")
            .to_string(),
        params: f["params"].to_string(),
    };
    let list = |key: &str| v[key].as_array().cloned().unwrap_or_default();
    let mut out: Vec<Fixture> = list("fixtures").iter().map(|f| fixture(f, false)).collect();
    out.extend(list("undecodable").iter().map(|f| fixture(f, true)));
    out
}

/// The directory itself if it holds a manifest, else its subdirectories that do.
fn manifest_dirs(dir: PathBuf) -> Vec<PathBuf> {
    if dir.join("manifest.json").exists() {
        return vec![dir];
    }
    let mut subs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("manifest.json").exists())
        .collect();
    assert!(
        !subs.is_empty(),
        "{}: no manifest.json in it or below",
        dir.display()
    );
    subs.sort();
    subs
}

fn dirs() -> Vec<PathBuf> {
    let root = crate::common::fixtures();
    let mut d = vec![root.clone()];
    d.extend(manifest_dirs(root.join("compat")));
    if let Ok(extra) = std::env::var("BLOSCFS_FIXTURES") {
        for e in extra.split(':').filter(|e| !e.is_empty()) {
            d.extend(manifest_dirs(PathBuf::from(e)));
        }
    }
    d
}

/// A small deterministic generator (no dependency needed).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

fn check(f: &Fixture, env: &Env) -> Result<(), String> {
    let io = env.source_io;
    let name = format!("{} ({}, {}, {io:?})", f.path.display(), f.kind, f.params);
    let opened = blosc_decode::open_path_with(&f.path, env);
    match f.expect.as_str() {
        "not-container" => {
            return match opened {
                Ok(None) => Ok(()),
                Ok(Some(_)) => Err(format!("{name}: detected as a container")),
                Err(e) => Err(format!("{name}: error instead of pass-through: {e}")),
            }
        }
        "error" => {
            // Opening may succeed (errors surface on read); reading must fail cleanly.
            let c = match opened {
                Err(e) => {
                    let msg = e.to_string();
                    return if msg.contains(&*f.path.to_string_lossy()) {
                        Ok(())
                    } else {
                        Err(format!("{name}: error does not name the file: {msg}"))
                    };
                }
                Ok(None) => return Err(format!("{name}: not detected")),
                Ok(Some(c)) => c,
            };
            let mut buf = vec![0u8; c.len() as usize];
            return match c.read_at(0, &mut buf) {
                Ok(_) => Err(format!("{name}: damaged file read without error")),
                Err(e) if e.to_string().contains("chunk 0") => Ok(()),
                Err(e) => Err(format!("{name}: error does not name the chunk: {e}")),
            };
        }
        "undecodable" => return check_undecodable(f, &name, opened),
        _ => {}
    }
    let c = match opened {
        Ok(Some(c)) => c,
        Ok(None) => return Err(format!("{name}: not detected as a container")),
        Err(e) => return Err(format!("{name}: {e}")),
    };
    // A `.npy` view is checked as the bytes numpy.save writes (its header
    // padded to 64 bytes, not to a page).
    let mut head = vec![0u8; c.len().min(1 << 17) as usize];
    c.read_at(0, &mut head)
        .map_err(|e| format!("{name}: read of the start: {e}"))?;
    let (skip, numpy) = crate::common::numpy_header(&head, c.len()).unwrap_or_default();
    let numpy_len = c.len() - skip as u64 + numpy.len() as u64;
    if numpy_len != f.len {
        return Err(format!("{name}: length {numpy_len} != expected {}", f.len));
    }
    // The size a listing shows (from the probe, without opening) is the
    // length served: the kernel reads a file only up to the size it was
    // given, and a read past the end of what the daemon serves fails.
    match blosc_decode::detect::probe_path(&f.path) {
        Ok(Some(p)) if p.len == c.len() => {}
        Ok(Some(p)) => {
            return Err(format!(
                "{name}: probe says {} bytes, opened {}",
                p.len,
                c.len()
            ))
        }
        other => return Err(format!("{name}: probe gave {other:?}")),
    }
    let big = f.len > (256 << 20);
    // Whole, in odd-sized pieces.
    let mut h = Sha256::new();
    h.update(&numpy);
    let mut whole = head[..skip].to_vec();
    let mut pos = skip as u64;
    let mut buf = vec![0u8; 77_777];
    while pos < c.len() {
        let n = c
            .read_at(pos, &mut buf)
            .map_err(|e| format!("{name}: read at {pos}: {e}"))?;
        if n == 0 {
            return Err(format!("{name}: short read at {pos}"));
        }
        h.update(&buf[..n]);
        if !big {
            whole.extend_from_slice(&buf[..n]);
        }
        pos += n as u64;
    }
    let got = format!("{:x}", h.finalize());
    if got != f.sha256 {
        return Err(format!("{name}: SHA-256 {got} != reference {}", f.sha256));
    }
    if big {
        return Ok(());
    }
    // Random windows against the verified whole, including empty and past-EOF ones.
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ c.len());
    for _ in 0..60 {
        let off = rng.below(c.len() + 10);
        let len = match rng.below(4) {
            0 => rng.below(16),
            1 => rng.below(5000),
            2 => rng.below(200_000),
            _ => c.len(),
        } as usize;
        let mut w = vec![0xAAu8; len];
        // Half the windows as the FUSE adapter reads: the rest of a block a
        // small read needed is cached after the reply (`Deferred`), and later
        // windows read those cached blocks.
        let r = if rng.below(2) == 0 {
            c.read_at_deferring(off, &mut w, &mut blosc_decode::Deferred::new())
        } else {
            c.read_at(off, &mut w)
        };
        let n = r.map_err(|e| format!("{name}: window {off}+{len}: {e}"))?;
        let expect_n = (c.len().saturating_sub(off) as usize).min(len);
        if n != expect_n {
            return Err(format!(
                "{name}: window {off}+{len} returned {n} bytes, expected {expect_n}"
            ));
        }
        if n > 0 && w[..n] != whole[off as usize..off as usize + n] {
            return Err(format!(
                "{name}: window {off}+{len} differs from the whole read"
            ));
        }
    }
    Ok(())
}

/// A file its writer's own decoder cannot read: a clean error naming the
/// file and chunk, or exactly the data that was written, never other bytes.
fn check_undecodable(
    f: &Fixture,
    name: &str,
    opened: blosc_decode::Result<Option<blosc_decode::Container>>,
) -> Result<(), String> {
    let c = match opened {
        Err(e) if e.to_string().contains(&*f.path.to_string_lossy()) => return Ok(()),
        Err(e) => return Err(format!("{name}: error does not name the file: {e}")),
        Ok(None) => return Err(format!("{name}: not detected")),
        Ok(Some(c)) => c,
    };
    let mut buf = vec![0u8; c.len() as usize];
    match c.read_at(0, &mut buf) {
        Err(e) if e.to_string().contains("chunk ") => Ok(()),
        Err(e) => Err(format!("{name}: error does not name the chunk: {e}")),
        Ok(n) => {
            let read = crate::common::as_numpy_saves(&buf[..n]);
            let got = format!("{:x}", Sha256::digest(&read));
            if read.len() as u64 == f.len && got == f.sha256 {
                Ok(())
            } else {
                Err(format!(
                    "{name}: undecodable by its writer, read without error as {n} bytes \
                     other than the {} written",
                    f.len
                ))
            }
        }
    }
}

#[test]
fn reference_fixtures_decode_byte_exact() {
    matrix(Access::Auto);
}

fn matrix(io: Access) {
    let mut env = crate::common::per_cpu(64 << 20);
    env.source_io = io;
    let mut failures = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut producers: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut total = 0;
    for dir in dirs() {
        for f in load(&dir) {
            total += 1;
            let r = check(&f, &env);
            let p = producers.entry(f.producer.clone()).or_default();
            match r {
                Ok(()) => {
                    *counts.entry(f.kind.clone()).or_default() += 1;
                    p.0 += 1;
                }
                Err(e) => {
                    failures.push(e);
                    p.1 += 1;
                }
            }
        }
    }
    eprintln!("fixtures passed per kind: {counts:?}");
    for (p, (ok, bad)) in &producers {
        eprintln!("  {p}: {ok} passed, {bad} failed");
    }
    assert!(total > 50, "only {total} fixtures found");
    assert!(
        failures.is_empty(),
        "{} of {total} fixtures failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
