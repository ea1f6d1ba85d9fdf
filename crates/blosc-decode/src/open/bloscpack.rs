//! Bloscpack files.

use crate::bytes::le_all;
use crate::ensure;
use crate::error::{Context, Error, Result};
use crate::format::bloscpack::{self as bp, Header};
use crate::format::chunk::{ChunkHeader, MIN_HEADER_LEN};
use crate::index::{ChunkChecksum, ChunkEntry, ChunkLoc, Index, Info};
use crate::io::{read_vec, Source};
use std::sync::Arc;

/// More chunks than this is refused.
pub const MAX_CHUNKS: u64 = 1 << 27;

/// Uncompressed size, when the header alone tells it.
pub fn probe(head: &[u8]) -> Option<u64> {
    let h = bp::parse_header(head).ok()?;
    if h.nchunks == 0 {
        return Some(0);
    }
    if h.nchunks > 0 && h.chunk_size >= 0 && h.last_chunk >= 0 {
        return (h.nchunks as u64 - 1)
            .checked_mul(h.chunk_size as u64)?
            .checked_add(h.last_chunk as u64);
    }
    None
}

fn chunk_header(src: &dyn Source, at: u64) -> Result<ChunkHeader> {
    let head = read_vec(src, at, MIN_HEADER_LEN as u64)?;
    // Bloscpack chunks are C-Blosc1 chunks: a 16-byte header is all there is
    // to know; pad so an extended header (Blosc2 writer) also parses.
    let mut h = head.clone();
    h.resize(32, 0);
    ChunkHeader::parse(&h)
}

/// Open a Bloscpack file: its header, metadata, offsets and checksums.
/// (A parser: it reads the file's sections in order, each checked before
/// the next is trusted, which one function shows best.)
pub fn open(src: Arc<dyn Source>) -> Result<Index> {
    let s = src.as_ref();
    let h: Header = bp::parse_header(&read_vec(s, 0, bp::HEADER_LEN as u64)?)?;
    let dlen = bp::digest_len(h.checksum)? as u64;
    let mut pos = bp::HEADER_LEN as u64;
    let mut metalayers = Vec::new();
    let mut extra = vec![(
        "checksum".to_string(),
        bp::CHECKSUM_NAMES[h.checksum as usize].to_string(),
    )];
    if h.metadata {
        let mh = bp::parse_meta_header(&read_vec(s, pos, bp::META_HEADER_LEN as u64)?)?;
        let data = read_vec(s, pos + bp::META_HEADER_LEN as u64, mh.comp_size as u64)?;
        if mh.checksum != 0 {
            let at = pos + bp::META_HEADER_LEN as u64 + mh.max_size.max(mh.comp_size) as u64;
            let stored = read_vec(s, at, bp::digest_len(mh.checksum)? as u64)?;
            bp::verify_checksum(mh.checksum, &data, &stored).context("metadata")?;
        }
        let meta = bp::decode_meta(&mh, &data)?;
        extra.push((
            "metadata".into(),
            String::from_utf8_lossy(&meta).into_owned(),
        ));
        metalayers.push(("bloscpack-metadata".to_string(), meta));
        pos += mh.section_len()?;
    }
    // Chunk positions, from the offsets table when it is complete.
    let mut starts: Option<Vec<u64>> = None;
    if h.offsets && h.nchunks >= 0 {
        let total = (h.nchunks as u64)
            .checked_add(h.max_app_chunks as u64)
            .filter(|&t| t <= MAX_CHUNKS && t * 8 <= s.len())
            .ok_or_else(|| {
                Error::corrupt(format!(
                    "offsets table of {} + {} entries does not fit",
                    h.nchunks, h.max_app_chunks
                ))
            })?;
        let table = read_vec(s, pos, total * 8)?;
        pos += total * 8;
        let offs: Vec<i64> = le_all(&table[..h.nchunks as usize * 8]).collect();
        if offs.iter().all(|&o| o >= 0) {
            starts = Some(offs.iter().map(|&o| o as u64).collect());
        }
    } else if h.offsets {
        return Err(Error::corrupt(
            "offsets flagged but the number of chunks is unknown",
        ));
    }
    let starts = match starts {
        Some(v) => v,
        None => walk(s, pos, &h, dlen)?,
    };
    if h.nchunks >= 0 {
        ensure!(
            starts.len() as u64 == h.nchunks as u64,
            corrupt,
            "found {} chunks but the header declares {}",
            starts.len(),
            h.nchunks
        );
    }
    let mut chunks = Vec::with_capacity(starts.len());
    let mut uoff = 0u64;
    let n = starts.len();
    for (i, &at) in starts.iter().enumerate() {
        let end = if i + 1 < n { starts[i + 1] } else { s.len() };
        ensure!(
            at < end && end <= s.len() && end - at >= dlen + MIN_HEADER_LEN as u64,
            corrupt,
            "chunk {i} at offset {at} does not fit before {end}"
        );
        let cbytes = end - at - dlen;
        let ulen = if h.chunk_size >= 0 && h.last_chunk >= 0 {
            if i + 1 < n {
                h.chunk_size as u64
            } else {
                h.last_chunk as u64
            }
        } else {
            chunk_header(s, at).in_chunk(i as u64)?.nbytes as u64
        };
        chunks.push(ChunkEntry {
            chunk: i as u64,
            uoff,
            ulen,
            loc: ChunkLoc::Stored {
                src: 0,
                offset: at,
                cbytes,
            },
            checksum: (h.checksum != 0).then_some(ChunkChecksum {
                algo: h.checksum,
                digest_offset: at + cbytes,
            }),
        });
        uoff += ulen;
    }
    let info = Info {
        format: "bloscpack".into(),
        version: h.version as u32,
        typesize: h.typesize as u32,
        chunksize: h.chunk_size.max(0) as u64,
        nchunks: n as u64,
        nbytes: uoff,
        cbytes: s.len(),
        codec: String::new(),
        filters: Vec::new(),
        metalayers,
        vlmetalayers: Vec::new(),
        extra,
    };
    Ok(Index {
        sources: vec![src],
        chunks,
        info,
        sizes_assumed: false,
    })
}

/// Find chunks by walking their headers from `pos` (no usable offsets).
fn walk(s: &dyn Source, mut pos: u64, h: &Header, dlen: u64) -> Result<Vec<u64>> {
    let mut starts = Vec::new();
    while pos < s.len() && (h.nchunks < 0 || (starts.len() as u64) < h.nchunks as u64) {
        ensure!(
            starts.len() as u64 <= MAX_CHUNKS,
            corrupt,
            "too many chunks"
        );
        let ch = chunk_header(s, pos).in_chunk(starts.len() as u64)?;
        ensure!(
            ch.cbytes as usize >= MIN_HEADER_LEN,
            corrupt,
            "chunk {} has cbytes {}",
            starts.len(),
            ch.cbytes
        );
        starts.push(pos);
        pos = pos + ch.cbytes as u64 + dlen;
    }
    ensure!(
        pos == s.len() || h.nchunks >= 0,
        corrupt,
        "the last chunk runs past the end of the file"
    );
    Ok(starts)
}
