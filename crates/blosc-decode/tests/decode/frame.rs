//! Blosc2 frames, sparse frames and b2nd arrays written by python-blosc2
//! (scripts/fixtures/gen_frame_fixtures.py -> tests/data/frame): the Index the frame
//! opener builds must decode, chunk by chunk, to exactly what python-blosc2
//! returns, and describe the container as python-blosc2 sees it.

use blosc_decode::decode::{decompress_chunk, fill_special};
use blosc_decode::format::b2nd;
use blosc_decode::format::chunk::{ChunkHeader, EXTENDED_HEADER_LEN};
use blosc_decode::index::{ChunkLoc, Index};
use blosc_decode::io::{read_vec, FileSource, MemSource};
use blosc_decode::open::frame;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn dir() -> PathBuf {
    crate::common::root().join("tests/data/frame")
}

fn all_files() -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir().join("manifest.json"))
        .expect("tests/data/frame/manifest.json (run scripts/fixtures/gen_frame_fixtures.py)");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["files"].as_array().unwrap().clone()
}

/// The containers expected to open.
fn manifest() -> Vec<serde_json::Value> {
    all_files()
        .into_iter()
        .filter(|e| e["expect"] == "ok")
        .collect()
}

fn try_open(e: &serde_json::Value) -> blosc_decode::Result<Index> {
    let p = dir().join(e["path"].as_str().unwrap());
    if e["kind"] == "sframe" {
        frame::open_sframe(&p)
    } else {
        frame::open(Arc::new(FileSource::open(&p)?))
    }
}

fn open(e: &serde_json::Value) -> Index {
    try_open(e).unwrap_or_else(|err| panic!("{}: {err}", e["path"]))
}

#[test]
fn unreadable_frames_are_clear_errors() {
    let bad: Vec<_> = all_files()
        .into_iter()
        .filter(|e| e["expect"] == "error")
        .collect();
    assert!(!bad.is_empty());
    for e in bad {
        let err = try_open(&e)
            .err()
            .unwrap_or_else(|| panic!("{} opened", e["path"]));
        assert!(err.to_string().contains("special chunks"), "{err}");
    }
}

/// Decode every chunk of `idx` through the Index alone and concatenate.
fn content(idx: &Index) -> blosc_decode::Result<Vec<u8>> {
    let mut out = Vec::new();
    for (i, c) in idx.chunks.iter().enumerate() {
        match &c.loc {
            ChunkLoc::Stored {
                src,
                offset,
                cbytes,
            } => {
                let s = idx.sources[*src as usize].as_ref();
                let head = read_vec(s, *offset, (EXTENDED_HEADER_LEN as u64).min(*cbytes))?;
                let h = ChunkHeader::parse(&head)?;
                if h.cbytes as u64 > *cbytes {
                    return Err(blosc_decode::Error::corrupt(format!(
                        "chunk {i}: header cbytes {} beyond the index bound {cbytes}",
                        h.cbytes
                    )));
                }
                let raw = read_vec(s, *offset, h.cbytes as u64)?;
                let d = decompress_chunk(&raw).map_err(|e| e.in_chunk(i as u64))?;
                if d.len() as u64 != c.ulen {
                    return Err(blosc_decode::Error::corrupt(format!(
                        "chunk {i}: decoded {} bytes, the index says {}",
                        d.len(),
                        c.ulen
                    )));
                }
                out.extend_from_slice(&d);
            }
            ChunkLoc::Special {
                kind,
                typesize,
                value,
            } => {
                let mut buf = vec![0u8; c.ulen as usize];
                fill_special(*kind, *typesize as usize, value, 0, &mut buf);
                out.extend_from_slice(&buf);
            }
        }
    }
    Ok(out)
}

fn sha(b: &[u8]) -> String {
    format!("{:x}", Sha256::digest(b))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn python_blosc2_frames_decode_exactly() {
    let files = manifest();
    assert!(files.len() >= 25);
    let mut failures = Vec::new();
    for e in &files {
        let name = e["path"].as_str().unwrap();
        let idx = open(e);
        if let Err(err) = idx.validate() {
            failures.push(format!("{name}: validate: {err}"));
            continue;
        }
        match content(&idx) {
            Ok(c) => {
                if c.len() as u64 != e["len"].as_u64().unwrap() || sha(&c) != e["sha256"] {
                    failures.push(format!("{name}: content differs ({} bytes)", c.len()));
                }
            }
            Err(err) => failures.push(format!("{name}: {err}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The table entry of each of the index's chunks, in order (a run of
/// special chunks is one entry: it stands for each of them). Checks that
/// entries are numbered by their first chunk and runs are special.
fn entry_of_each_chunk(idx: &Index) -> Vec<&blosc_decode::index::ChunkEntry> {
    let mut out = Vec::new();
    for (k, e) in idx.chunks.iter().enumerate() {
        assert_eq!(e.chunk, out.len() as u64, "entry {k} numbered");
        let next = idx.chunks.get(k + 1).map_or(idx.info.nchunks, |x| x.chunk);
        assert!(
            next == e.chunk + 1 || matches!(e.loc, ChunkLoc::Special { .. }),
            "entry {k} covers chunks {} to {next} but is stored",
            e.chunk
        );
        out.extend(std::iter::repeat_n(e, (next - e.chunk) as usize));
    }
    out
}

#[test]
fn info_matches_python_blosc2() {
    for e in manifest() {
        let name = e["path"].as_str().unwrap();
        let idx = open(&e);
        let info = &idx.info;
        let variable = e["variable"].as_bool().unwrap_or(false);
        assert_eq!(info.nchunks, e["nchunks"].as_u64().unwrap(), "{name}");
        // One entry per chunk, but runs of special chunks share one.
        let per_chunk = entry_of_each_chunk(&idx);
        assert_eq!(per_chunk.len() as u64, info.nchunks, "{name}");
        assert_eq!(info.nbytes, e["len"].as_u64().unwrap(), "{name}");
        assert_eq!(
            info.typesize as u64,
            e["typesize"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(info.version, if variable { 3 } else { 2 }, "{name}");
        if variable {
            assert_eq!(info.chunksize, 0, "{name}");
        } else if info.nchunks == 0 {
            // Empty: C-Blosc2 writes chunksize -1 until the header is rewritten.
            let c = e["chunksize"].as_u64().unwrap();
            assert!(info.chunksize == 0 || info.chunksize == c, "{name}");
        } else {
            assert_eq!(info.chunksize, e["chunksize"].as_u64().unwrap(), "{name}");
        }
        let fmt = if e["kind"] == "sframe" {
            "blosc2-sframe"
        } else {
            "blosc2-frame"
        };
        assert_eq!(info.format, fmt, "{name}");
        let on_disk: u64 = if e["kind"] == "sframe" {
            std::fs::read_dir(dir().join(name))
                .unwrap()
                .map(|f| f.unwrap().metadata().unwrap().len())
                .sum()
        } else {
            std::fs::metadata(dir().join(name)).unwrap().len()
        };
        assert_eq!(info.cbytes, on_disk, "{name}: cbytes");
        if let Some(c) = e["codec"].as_str() {
            assert_eq!(info.codec, c, "{name}");
        }
        // Filters come from the header's pipeline slots only (not its codec bytes).
        for f in &info.filters {
            assert!(
                ["shuffle", "bitshuffle", "delta", "trunc_prec", "bytedelta"]
                    .iter()
                    .any(|k| f.contains(k)),
                "{name}: odd filter name {f}"
            );
        }
        let mut names: Vec<&str> = info.metalayers.iter().map(|(n, _)| n.as_str()).collect();
        names.sort();
        let expect: Vec<&str> = e["metalayers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(names, expect, "{name}: metalayer names");
        for (k, v) in e["metavalues"].as_object().unwrap() {
            let got = info.metalayers.iter().find(|(n, _)| n == k).unwrap();
            assert_eq!(hex(&got.1), v.as_str().unwrap(), "{name}: metalayer {k}");
        }
        let vl = e["vlmetalayers"].as_object().unwrap();
        assert_eq!(info.vlmetalayers.len(), vl.len(), "{name}: vlmetalayers");
        for (k, v) in vl {
            let got = info
                .vlmetalayers
                .iter()
                .find(|(n, _)| n == k)
                .unwrap_or_else(|| panic!("{name}: no vlmetalayer {k}"));
            assert_eq!(hex(&got.1), v.as_str().unwrap(), "{name}: vlmetalayer {k}");
        }
        // Special offsets become Special entries; stored ones point inside the file.
        let offs = e["offsets"].as_array().unwrap();
        assert_eq!(offs.len(), per_chunk.len(), "{name}");
        for (i, (o, c)) in offs.iter().zip(&per_chunk).enumerate() {
            let o = o.as_i64().unwrap();
            match &c.loc {
                ChunkLoc::Special { .. } => assert!(o < 0, "{name}: chunk {i}"),
                ChunkLoc::Stored { src, offset, .. } => {
                    assert!(o >= 0, "{name}: chunk {i}");
                    assert!(
                        *offset < idx.sources[*src as usize].len(),
                        "{name}: chunk {i}"
                    );
                }
            }
        }
        if let Some(b) = e.get("b2nd") {
            let (_, raw) = info
                .metalayers
                .iter()
                .find(|(n, _)| n == "b2nd")
                .unwrap_or_else(|| panic!("{name}: no b2nd metalayer"));
            let m = b2nd::parse(raw).unwrap();
            let dims = |k: &str| -> Vec<u64> {
                b[k].as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap())
                    .collect()
            };
            assert_eq!(m.shape, dims("shape"), "{name}");
            assert_eq!(m.chunkshape, dims("chunks"), "{name}");
            assert_eq!(m.blockshape, dims("blocks"), "{name}");
            assert_eq!(m.dtype, b["dtype"].as_str().unwrap(), "{name}");
            assert_eq!(m.dtype_format, 0, "{name}");
        }
    }
}

#[test]
fn probe_gives_uncompressed_size() {
    for e in all_files() {
        let p = dir().join(e["path"].as_str().unwrap());
        let f = if e["kind"] == "sframe" {
            p.join("chunks.b2frame")
        } else {
            p
        };
        let head = std::fs::read(&f).unwrap();
        let head = &head[..head.len().min(4096)];
        assert_eq!(
            frame::probe(head),
            Some(e["len"].as_u64().unwrap()),
            "{}",
            f.display()
        );
    }
    assert_eq!(frame::probe(b"b2frame"), None);
    assert_eq!(frame::probe(&[0x9e, 0xa8]), None);
    assert_eq!(frame::probe(&[]), None);
}

// ---- damaged input: clear errors, never a panic ----

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap()
}

fn open_mem(b: &[u8]) -> blosc_decode::Result<Index> {
    frame::open(Arc::new(MemSource::new(b.to_vec())))
}

/// Open, validate and decode; any error is fine, a panic is not.
fn try_all(b: &[u8]) -> blosc_decode::Result<Vec<u8>> {
    let idx = open_mem(b)?;
    idx.validate()?;
    content(&idx)
}

#[test]
fn truncated_frames_are_errors() {
    for name in [
        "fixed-lz4.b2frame",
        "variable-append.b2frame",
        "special-mixed.b2frame",
        "b2nd-2d.b2nd",
    ] {
        let b = bytes(name);
        let full = try_all(&b).unwrap();
        for n in 0..b.len() {
            // Cutting off trailer bytes may still give the right content
            // (the trailer only holds vlmetalayers); anything else must fail.
            if let Ok(c) = try_all(&b[..n]) {
                assert_eq!(
                    c, full,
                    "{name} cut at {n}: wrong content instead of an error"
                );
            }
        }
        // Cut inside the header or the data: always an error.
        let hl = u32::from_be_bytes(b[11..15].try_into().unwrap()) as usize;
        for n in [0, 1, 10, 20, 24, hl / 2, hl - 1, hl, hl + 10] {
            assert!(open_mem(&b[..n]).is_err(), "{name} cut at {n} opened");
        }
    }
}

#[test]
fn corrupted_frames_never_panic() {
    for name in [
        "fixed-zstd.b2frame",
        "variable-edits.b2frame",
        "fill-nan-ts4.b2frame",
        "empty-vlmeta.b2frame",
        "b2nd-3d.b2nd",
    ] {
        let b = bytes(name);
        // Every byte set to a few telling values.
        for i in 0..b.len() {
            for v in [0x00u8, 0xff, 0x7f, 0x80, b[i] ^ 0x01] {
                let mut m = b.clone();
                m[i] = v;
                let _ = try_all(&m);
            }
        }
    }
}

fn set_be(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

#[test]
fn lying_sizes_are_errors() {
    let b = bytes("fixed-lz4.b2frame");
    // header_len beyond the file / below the fixed part
    for hl in [i32::MAX, 1 << 20, 0, -5, 10] {
        let mut m = b.clone();
        set_be(&mut m, 11, &hl.to_be_bytes());
        assert!(open_mem(&m).is_err(), "header_len {hl}");
    }
    // nbytes 2^40 with chunksize 4000: more chunks than offsets, no allocation
    let mut m = b.clone();
    set_be(&mut m, 30, &(1i64 << 40).to_be_bytes());
    let e = open_mem(&m).err().expect("huge nbytes");
    assert!(!e.reason.is_empty());
    // negative nbytes / cbytes
    for at in [30, 39] {
        let mut m = b.clone();
        set_be(&mut m, at, &(-1i64).to_be_bytes());
        assert!(open_mem(&m).is_err(), "negative at {at}");
    }
    // cbytes pointing the offsets chunk past the end
    let mut m = b.clone();
    set_be(&mut m, 39, &(1i64 << 50).to_be_bytes());
    assert!(open_mem(&m).is_err());
    // cbytes a bit short: the "offsets" land inside a data chunk
    let mut m = b.clone();
    let cb = i64::from_be_bytes(b[39..47].try_into().unwrap());
    set_be(&mut m, 39, &(cb - 3).to_be_bytes());
    assert!(try_all(&m).is_err());
    // chunksize 1: nbytes needs 10,000 offsets, the index holds 3
    let mut m = b.clone();
    set_be(&mut m, 58, &1i32.to_be_bytes());
    assert!(open_mem(&m).is_err());
    // typesize 0 / negative
    for ts in [0i32, -4] {
        let mut m = b.clone();
        set_be(&mut m, 48, &ts.to_be_bytes());
        assert!(open_mem(&m).is_err(), "typesize {ts}");
    }
    // frame type 7
    let mut m = b.clone();
    m[26] = 7;
    assert!(open_mem(&m).is_err());
    // a sparse-frame index opened as a contiguous frame
    let s = std::fs::read(dir().join("sparse-fixed.b2frame/chunks.b2frame")).unwrap();
    assert!(open_mem(&s).is_err());
}

/// Rebuild `fixed-lz4.b2frame` with a replaced offsets chunk holding `offs`.
fn with_offsets(offs: &[i64]) -> Vec<u8> {
    let b = bytes("fixed-lz4.b2frame");
    let hl = u32::from_be_bytes(b[11..15].try_into().unwrap()) as usize;
    let cb = i64::from_be_bytes(b[39..47].try_into().unwrap()) as usize;
    let old = ChunkHeader::parse(&b[hl + cb..hl + cb + 32]).unwrap();
    let trailer = b[hl + cb + old.cbytes as usize..].to_vec();
    // A memcpyed Blosc2 chunk of int64s.
    let raw: Vec<u8> = offs.iter().flat_map(|o| o.to_le_bytes()).collect();
    let mut ch = vec![0u8; 32];
    ch[0] = 5;
    ch[1] = 1;
    ch[2] = 0x02 | 0x01 | 0x04; // memcpyed, extended header
    ch[3] = 8;
    ch[4..8].copy_from_slice(&(raw.len() as u32).to_le_bytes());
    ch[8..12].copy_from_slice(&(raw.len().max(8) as u32).to_le_bytes());
    ch[12..16].copy_from_slice(&((32 + raw.len()) as u32).to_le_bytes());
    ch.extend_from_slice(&raw);
    let mut out = b[..hl + cb].to_vec();
    out.extend_from_slice(&ch);
    out.extend_from_slice(&trailer);
    let len = out.len() as u64;
    out[16..24].copy_from_slice(&len.to_be_bytes());
    out
}

#[test]
fn rebuilt_offsets_work_and_bad_ones_fail() {
    // Sanity: the rebuilt frame with the true offsets reads as the original.
    let good = with_offsets(&[0, 542, 1084]);
    assert_eq!(
        try_all(&good).unwrap(),
        try_all(&bytes("fixed-lz4.b2frame")).unwrap()
    );
    // Special kinds in the top byte.
    let z = with_offsets(&[0, i64::from_be_bytes([0x81, 0, 0, 0, 0, 0, 0, 0]), 1084]);
    let c = try_all(&z).unwrap();
    assert!(c[4000..8000].iter().all(|&x| x == 0));
    // Pointing outside the data area, or into the middle of a chunk.
    // (-1 is a zeros chunk to C-Blosc2: it tests the kind bits, zeros first.)
    let c = try_all(&with_offsets(&[0, 542, -1])).unwrap();
    assert!(c[8000..].iter().all(|&x| x == 0));
    let no_kind = i64::from_be_bytes([0x88, 0, 0, 0, 0, 0, 0, 1]);
    for bad in [
        [0, 1 << 40, 1084],
        [0, 5, 1084],
        [0, 542, i64::MIN],
        [0, 542, no_kind],
        [0, 542, 1_000_000],
    ] {
        assert!(try_all(&with_offsets(&bad)).is_err(), "{bad:?}");
    }
    // Too few / too many offsets for nbytes/chunksize.
    assert!(try_all(&with_offsets(&[0, 542])).is_err());
    assert!(try_all(&with_offsets(&[0, 542, 1084, 0])).is_err());
}

/// A copy of `sparse-fixed.b2frame` in `tmp`: (the fixture, the copy).
fn sparse_copy(tmp: &Path) -> (PathBuf, PathBuf) {
    let src = dir().join("sparse-fixed.b2frame");
    let dst = tmp.join("s.b2frame");
    std::fs::create_dir(&dst).unwrap();
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), dst.join(f.file_name())).unwrap();
    }
    (src, dst)
}

#[test]
fn sframe_chunk_names_come_from_numbers_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, dst) = sparse_copy(tmp.path());
    let idx = frame::open_sframe(&dst).unwrap();
    for s in &idx.sources[1..] {
        let p = s.path().unwrap();
        assert_eq!(p.parent().unwrap(), dst.as_path());
        let n = p.file_name().unwrap().to_str().unwrap();
        assert!(n.len() == 14 && n.ends_with(".chunk"), "{n}");
    }
    // A missing chunk file is an error naming it (at read time: files open lazily).
    std::fs::remove_file(dst.join("00000002.chunk")).unwrap();
    let idx = frame::open_sframe(&dst).unwrap();
    let e = content(&idx).unwrap_err();
    assert!(e.to_string().contains("00000002.chunk"), "{e}");
    // No chunks.b2frame: an error.
    assert!(frame::open_sframe(Path::new("/nonexistent/dir")).is_err());
}

/// A sparse frame opened by the library alone (`LocalFrame`: each chunk
/// file opened for each read): a chunk file rewritten with other bytes
/// after its first read fails the reads of it as `Changed`, never decoded
/// with the first version's sizes.
#[test]
fn sframe_chunk_files_must_stay_the_version_first_read() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = sparse_copy(tmp.path());
    let idx = frame::open_sframe(&dst).unwrap();
    let whole = content(&idx).unwrap();
    assert_eq!(whole, content(&frame::open_sframe(&src).unwrap()).unwrap());
    // One byte longer: another version whatever the timestamps' granularity.
    let chunk = dst.join("00000001.chunk");
    let mut other = std::fs::read(&chunk).unwrap();
    other.push(0);
    std::fs::write(&chunk, &other).unwrap();
    let e = content(&idx).unwrap_err();
    assert_eq!(e.kind, blosc_decode::ErrorKind::Changed, "{e}");
    assert!(e.to_string().contains("00000001.chunk"), "{e}");
}
