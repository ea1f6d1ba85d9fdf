//! Frames whose chunks differ in size, written by python-blosc2 2.2.9,
//! 2.5.1, 3.0.0, 4.0.0 and 4.14.1 (`scripts/fixtures/writers/sizes.py` ->
//! `tests/fixtures/writers/sizes/<release>/`). The 2.2-4.0 frames keep a
//! fixed chunk size in their header though a chunk in the middle (or the
//! first) is shorter: each chunk's own header says where the next one
//! starts. Served, they must be exactly what the writer's own reader returns
//! (`decompress_chunk(i)` concatenated), whatever is read first, and as long
//! as the probe (what `ls` shows) says; frames the writer itself lost a chunk
//! of (it returns fewer bytes than the frame declares) are refused.

use crate::common;
use blosc_decode::detect::probe_path;
use blosc_decode::{open_path_with, Container, Env};
use common::*;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

struct Frame {
    path: PathBuf,
    name: String,
    nbytes: u64,
    chunks: Vec<u64>,
    sha256: String,
    ok: bool,
}

/// Every frame of every release's manifest.
fn frames() -> Vec<Frame> {
    let root = fixture("writers/sizes");
    let mut out = Vec::new();
    let mut releases: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    releases.sort();
    for rel in releases {
        let text = std::fs::read_to_string(rel.join("manifest.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let version = v["producer"]["blosc2"].as_str().unwrap().to_string();
        for f in v["files"].as_array().unwrap() {
            let p = f["path"].as_str().unwrap();
            out.push(Frame {
                path: rel.join(p),
                name: format!("{version}/{p}"),
                nbytes: f["nbytes"].as_u64().unwrap(),
                chunks: f["chunks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_u64().unwrap())
                    .collect(),
                sha256: f["sha256"].as_str().unwrap().to_string(),
                ok: f["expect"] == "ok",
            });
        }
    }
    assert!(out.len() >= 50, "{} frames", out.len());
    out
}

fn open(f: &Frame, env: &Env) -> Container {
    open_path_with(&f.path, env)
        .unwrap_or_else(|e| panic!("{}: {e}", f.name))
        .unwrap()
}

fn env() -> Env {
    Env::new(16 << 20)
}

fn read(c: &Container, at: u64, len: u64) -> blosc_decode::Result<Vec<u8>> {
    let mut b = vec![0u8; len as usize];
    let n = c.read_at(at, &mut b)?;
    b.truncate(n);
    Ok(b)
}

/// The writer's content, read front to back and checked against its hash.
fn whole(f: &Frame) -> Vec<u8> {
    let c = open(f, &env());
    let b = read(&c, 0, c.len() + 10).unwrap();
    assert_eq!(
        format!("{:x}", Sha256::digest(&b)),
        f.sha256,
        "{}: content",
        f.name
    );
    b
}

/// Front to back, in reads of a few sizes: the writer's bytes, as many as
/// the probe (the listed size) and the frame's header say.
#[test]
fn frames_of_mixed_chunk_sizes_serve_the_writers_bytes() {
    let mut mixed = 0;
    for f in frames().iter().filter(|f| f.ok) {
        let want = whole(f);
        assert_eq!(want.len() as u64, f.nbytes, "{}", f.name);
        let probe = probe_path(&f.path).unwrap().unwrap();
        assert_eq!(probe.len, f.nbytes, "{}: listed size", f.name);
        for step in [4096u64, 5000, 65536] {
            let c = open(f, &env());
            assert_eq!(c.len(), f.nbytes, "{}", f.name);
            let mut got = Vec::new();
            while (got.len() as u64) < c.len() {
                got.extend(read(&c, got.len() as u64, step).unwrap());
            }
            assert!(got == want, "{}: read in steps of {step}", f.name);
        }
        if f.chunks.iter().any(|&n| n != f.chunks[0]) {
            mixed += 1;
        }
    }
    assert!(mixed >= 40, "{mixed} frames of mixed sizes");
}

/// The first read of a fresh container far from the start (the last chunk,
/// the middle of a short chunk, each chunk from the last to the first):
/// exact. Nothing before it has been read to say where it starts.
#[test]
fn a_far_first_read_is_exact() {
    for f in frames().iter().filter(|f| f.ok) {
        let want = whole(f);
        let starts: Vec<u64> = f
            .chunks
            .iter()
            .scan(0, |at, &n| {
                *at += n;
                Some(*at - n)
            })
            .collect();
        let last = *starts.last().unwrap();
        let c = open(f, &env());
        assert_eq!(
            read(&c, last, f.nbytes).unwrap(),
            want[last as usize..],
            "{}: the last chunk first",
            f.name
        );
        // The middle of each chunk, first thing, in a container of its own.
        for (i, (&s, &n)) in starts.iter().zip(&f.chunks).enumerate() {
            let c = open(f, &env());
            let (a, b) = (s + n / 2 - 100, s + n / 2 + 100);
            assert_eq!(
                read(&c, a, b - a).unwrap(),
                want[a as usize..b as usize],
                "{}: chunk {i} first",
                f.name
            );
        }
        // Chunk by chunk from the last, across each boundary.
        let c = open(f, &env());
        for (i, &s) in starts.iter().enumerate().rev() {
            let a = s.saturating_sub(50);
            let b = (s + 50).min(f.nbytes);
            assert_eq!(
                read(&c, a, b - a).unwrap(),
                want[a as usize..b as usize],
                "{}: boundary {i} backwards",
                f.name
            );
        }
    }
}

/// Readers with decode-ahead on (a pool of two): spans decoded ahead come
/// from where the chunks really start.
#[test]
fn decode_ahead_follows_the_real_chunk_starts() {
    for f in frames().iter().filter(|f| f.ok) {
        let want = whole(f);
        let mut env = pooled(16 << 20, 2);
        env.decode_ahead = blosc_decode::DecodeAhead::Fixed(64 << 10);
        env.span = 16 << 10;
        let c = std::sync::Arc::new(open(f, &env));
        let mut got = Vec::new();
        let mut buf = vec![0u8; 3000];
        let stream = blosc_decode::Stream::new();
        while (got.len() as u64) < c.len() {
            let mut later = blosc_decode::Deferred::none();
            let r = c.read_shared(&stream, got.len() as u64, &mut buf, &mut later);
            got.extend_from_slice(r.unwrap().bytes(&buf));
        }
        assert!(got == want, "{}", f.name);
    }
}

/// A frame the writer lost a chunk of while writing (2.x counts chunks as
/// nbytes / chunksize, and two short chunks make it one short): the writer
/// reads back fewer bytes than the frame declares, so no size is right for
/// it. Refused with an error that says why; the probe still sees a frame.
#[test]
fn a_frame_its_writer_lost_a_chunk_of_is_refused() {
    let lost: Vec<_> = frames().into_iter().filter(|f| !f.ok).collect();
    assert_eq!(lost.len(), 8, "2 frames from each of 4 releases");
    for f in lost {
        let err = match open_path_with(&f.path, &env()) {
            Err(e) => e,
            Ok(_) => panic!("{} opened", f.name),
        };
        let msg = err.to_string();
        assert!(msg.contains("lost-"), "{}: {msg}", f.name);
        assert!(
            msg.contains("offsets index holds") || msg.contains("chunks hold"),
            "{}: {msg}",
            f.name
        );
        assert_eq!(
            probe_path(&f.path).unwrap().unwrap().len,
            f.nbytes,
            "{}",
            f.name
        );
    }
}
