//! Contiguous and sparse Blosc2 frames.

use crate::decode::decompress_chunk;
use crate::describe;
use crate::ensure;
use crate::error::{Error, Result};
use crate::format::chunk::{ChunkHeader, EXTENDED_HEADER_LEN, MIN_HEADER_LEN};
use crate::format::frame::{self, FrameHeader, Offset};
use crate::index::{ChunkEntry, ChunkLoc, Index, Info};
use crate::io::{read_vec, FileSource, LazyFileSource, Source};
use std::path::Path;
use std::sync::Arc;

/// More chunks than this in one frame is refused (8 bytes of index each).
pub const MAX_CHUNKS: u64 = 1 << 27;
/// Metalayer values larger than this are not decoded.
const MAX_VLMETA: u64 = 64 << 20;

/// The uncompressed size a frame's first bytes declare.
pub fn probe(head: &[u8]) -> Option<u64> {
    let (hl, _) = frame::prefix(head).ok()?;
    let h = frame::parse_header(head).ok();
    match h {
        Some(h) => Some(h.nbytes),
        None => {
            let _ = hl;
            None
        }
    }
}

pub fn read_header(src: &dyn Source) -> Result<FrameHeader> {
    let n = (frame::PREFIX_LEN as u64).min(src.len());
    let head = read_vec(src, 0, n)?;
    let (hl, _) = frame::prefix(&head)?;
    let buf = read_vec(src, 0, hl)?;
    frame::parse_header(&buf)
}

/// Read and decode the offsets chunk at `at`, expecting `nchunks` entries
/// when known.
fn read_offsets(src: &dyn Source, at: u64) -> Result<Vec<Offset>> {
    let head = read_vec(
        src,
        at,
        (EXTENDED_HEADER_LEN as u64).min(src.len().saturating_sub(at)),
    )
    .map_err(|e| Error {
        reason: format!("offsets index: {}", e.reason),
        ..e
    })?;
    let h = ChunkHeader::parse(&head).map_err(|e| Error {
        reason: format!("offsets index: {}", e.reason),
        ..e
    })?;
    ensure!(
        (h.nbytes as u64) / 8 <= MAX_CHUNKS,
        corrupt,
        "offsets index declares {} chunks, more than {MAX_CHUNKS}",
        h.nbytes / 8
    );
    let chunk = read_vec(src, at, h.cbytes as u64)?;
    let decoded = decompress_chunk(&chunk).map_err(|e| Error {
        reason: format!("offsets index: {}", e.reason),
        ..e
    })?;
    frame::offsets(&decoded)
}

fn info_from(h: &FrameHeader, format: &str, nchunks: u64, cbytes: u64) -> Info {
    let mut filters: Vec<String> = h
        .filters
        .iter()
        .filter(|&&f| f != 0)
        .map(|&f| describe::filter_name(f))
        .collect();
    filters.dedup();
    let extra = vec![("clevel".to_string(), h.clevel.to_string())];
    Info {
        format: format.into(),
        version: h.version as u32,
        typesize: h.typesize,
        chunksize: if h.variable_chunks {
            0
        } else {
            h.chunksize as u64
        },
        nchunks,
        nbytes: h.nbytes,
        cbytes,
        codec: frame::codec_name(h.codec),
        filters,
        metalayers: h.metalayers.clone(),
        vlmetalayers: Vec::new(),
        extra,
    }
}

/// Chunk table entries from offsets. `stored(i, n)` gives the location and
/// cbytes bound of the stored chunk with index entry `n`.
fn build_chunks(
    h: &FrameHeader,
    offs: &[Offset],
    mut stored: impl FnMut(usize, u64) -> Result<(ChunkLoc, Option<u64>)>,
) -> Result<Vec<ChunkEntry>> {
    let mut chunks = Vec::with_capacity(offs.len());
    let mut uoff = 0u64;
    let fixed = !h.variable_chunks && h.chunksize > 0;
    for (i, o) in offs.iter().enumerate() {
        let remaining = h
            .nbytes
            .checked_sub(uoff)
            .ok_or_else(|| Error::corrupt("chunks exceed the frame's size"))?;
        let (loc, nbytes) = match *o {
            Offset::At(n) => stored(i, n).map_err(|e| e.in_chunk(i as u64))?,
            Offset::Special(kind) => (
                ChunkLoc::Special {
                    kind,
                    typesize: h.typesize.min(255) as u8,
                    value: Box::new([]),
                },
                None,
            ),
        };
        let ulen = if fixed {
            (h.chunksize as u64).min(remaining)
        } else {
            match nbytes {
                Some(n) => n,
                None => {
                    return Err(Error::unsupported(
                        "special chunk in a frame of variable chunk sizes has no known size",
                    )
                    .in_chunk(i as u64))
                }
            }
        };
        chunks.push(ChunkEntry {
            uoff,
            ulen,
            loc,
            checksum: None,
        });
        uoff += ulen;
    }
    Ok(chunks)
}

fn chunk_nbytes(src: &dyn Source, at: u64) -> Result<u64> {
    let head = read_vec(src, at, MIN_HEADER_LEN as u64)?;
    let nbytes = u32::from_le_bytes(head[4..8].try_into().unwrap());
    ChunkHeader::parse(&[&head[..], &[0u8; 16]].concat())?;
    Ok(nbytes as u64)
}

fn vlmetalayers(src: &dyn Source, h: &FrameHeader) -> Result<Vec<(String, Vec<u8>)>> {
    if !h.has_vlmetalayers {
        return Ok(Vec::new());
    }
    let len = src.len().min(h.frame_len);
    ensure!(
        len >= frame::TAIL_LEN as u64,
        truncated,
        "frame too short for a trailer"
    );
    let tail = read_vec(src, len - frame::TAIL_LEN as u64, frame::TAIL_LEN as u64)?;
    let tl = frame::trailer_len(&tail)?;
    ensure!(
        tl <= len && tl <= MAX_VLMETA,
        corrupt,
        "frame trailer of {tl} bytes does not fit"
    );
    let tr = read_vec(src, len - tl, tl)?;
    let mut out = Vec::new();
    for (name, raw) in frame::parse_trailer(&tr)? {
        // Values are Blosc2 chunks; show their decoded content.
        let value = match ChunkHeader::parse(&raw) {
            Ok(ch) if (ch.nbytes as u64) <= MAX_VLMETA => decompress_chunk(&raw).unwrap_or(raw),
            _ => raw,
        };
        out.push((name, value));
    }
    Ok(out)
}

/// Open a contiguous frame.
pub fn open(src: Arc<dyn Source>) -> Result<Index> {
    let h = read_header(src.as_ref())?;
    ensure!(
        h.frame_type == 0,
        corrupt,
        "a sparse frame header in a file (its chunks live in a directory)"
    );
    let data_end = h
        .header_len
        .checked_add(h.cbytes)
        .filter(|&e| e <= src.len())
        .ok_or_else(|| {
            Error::truncated(format!(
                "frame declares {} bytes of chunks after its {}-byte header but the file has {}",
                h.cbytes,
                h.header_len,
                src.len()
            ))
        })?;
    let offs = read_offsets(src.as_ref(), data_end)?;
    let fixed = !h.variable_chunks && h.chunksize > 0;
    if fixed {
        let expect = h.nbytes.div_ceil(h.chunksize as u64);
        ensure!(
            offs.len() as u64 == expect,
            corrupt,
            "frame holds {} chunk offsets but {} bytes in chunks of {} need {expect}",
            offs.len(),
            h.nbytes,
            h.chunksize
        );
    }
    let srcr = src.as_ref();
    let chunks = build_chunks(&h, &offs, |_, o| {
        let at = h
            .header_len
            .checked_add(o)
            .filter(|&a| a < data_end)
            .ok_or_else(|| {
                Error::corrupt(format!(
                    "chunk offset {o} points outside the frame's data ({} bytes)",
                    h.cbytes
                ))
            })?;
        let nbytes = if fixed {
            None
        } else {
            Some(chunk_nbytes(srcr, at)?)
        };
        Ok((
            ChunkLoc::Stored {
                src: 0,
                offset: at,
                cbytes: data_end - at,
            },
            nbytes,
        ))
    })?;
    let mut info = info_from(&h, "blosc2-frame", chunks.len() as u64, src.len());
    info.vlmetalayers = vlmetalayers(src.as_ref(), &h).unwrap_or_else(|e| {
        log::warn!("frame trailer unreadable ({e}); variable-length metalayers skipped");
        Vec::new()
    });
    Ok(Index {
        sources: vec![src],
        chunks,
        info,
    })
}

/// Is `dir` a sparse frame (a directory holding `chunks.b2frame`)?
pub fn is_sframe_dir(dir: &Path) -> bool {
    dir.join("chunks.b2frame").is_file()
}

/// Open a sparse frame directory. Chunk files are named from the index
/// numbers (`%08X.chunk`) inside `dir` only, and opened on first read.
pub fn open_sframe(dir: &Path) -> Result<Index> {
    let index_path = dir.join("chunks.b2frame");
    let src: Arc<dyn Source> = Arc::new(FileSource::open(&index_path)?);
    let h = read_header(src.as_ref()).map_err(|e| e.in_file(&index_path))?;
    ensure!(
        h.frame_type == 1,
        corrupt,
        "chunks.b2frame is not a sparse-frame index (frame type {})",
        h.frame_type
    );
    let offs = read_offsets(src.as_ref(), h.header_len).map_err(|e| e.in_file(&index_path))?;
    let fixed = !h.variable_chunks && h.chunksize > 0;
    let mut sources: Vec<Arc<dyn Source>> = vec![src.clone()];
    let mut total_c = src.len();
    let chunks = build_chunks(&h, &offs, |_, n| {
        ensure!(
            n <= u32::MAX as u64,
            corrupt,
            "chunk number {n} is out of range"
        );
        let path = dir.join(format!("{n:08X}.chunk"));
        let s: Arc<dyn Source> = Arc::new(LazyFileSource::new(path));
        let nbytes = if fixed {
            None
        } else {
            Some(chunk_nbytes(s.as_ref(), 0)?)
        };
        if let Ok(md) = std::fs::metadata(dir.join(format!("{n:08X}.chunk"))) {
            total_c += md.len();
        }
        sources.push(s);
        Ok((
            ChunkLoc::Stored {
                src: (sources.len() - 1) as u32,
                offset: 0,
                cbytes: u32::MAX as u64,
            },
            nbytes,
        ))
    })?;
    let mut info = info_from(&h, "blosc2-sframe", chunks.len() as u64, total_c);
    info.vlmetalayers = vlmetalayers(src.as_ref(), &h).unwrap_or_default();
    Ok(Index {
        sources,
        chunks,
        info,
    })
}
