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

/// Open a Bloscpack file: its header, metadata, offsets and checksums,
/// each section checked before the next is trusted.
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
        let (meta, len) = metadata(s, pos)?;
        extra.push((
            "metadata".into(),
            String::from_utf8_lossy(&meta).into_owned(),
        ));
        metalayers.push(("bloscpack-metadata".to_string(), meta));
        pos += len;
    }
    let starts = match offsets(s, &h, &mut pos)? {
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
    let chunks = entries(s, &h, &starts, dlen)?;
    let nbytes = chunks.last().map_or(0, |c| c.uoff + c.ulen);
    let info = Info {
        format: "bloscpack".into(),
        version: h.version as u32,
        typesize: h.typesize as u32,
        chunksize: h.chunk_size.max(0) as u64,
        nchunks: chunks.len() as u64,
        nbytes,
        cbytes: s.len(),
        codec: String::new(),
        filters: Vec::new(),
        metalayers,
        vlmetalayers: Vec::new(),
        vlmetalayers_unreadable: false,
        extra,
    };
    Ok(Index {
        sources: vec![src],
        chunks,
        info,
        sizes_assumed: false,
    })
}

/// The metadata section at `pos`, checked against its digest if it has
/// one: its decoded bytes and the section's length.
fn metadata(s: &dyn Source, pos: u64) -> Result<(Vec<u8>, u64)> {
    let mh = bp::parse_meta_header(&read_vec(s, pos, bp::META_HEADER_LEN as u64)?)?;
    let data = read_vec(s, pos + bp::META_HEADER_LEN as u64, mh.comp_size as u64)?;
    if mh.checksum != 0 {
        let at = pos + bp::META_HEADER_LEN as u64 + mh.max_size.max(mh.comp_size) as u64;
        let stored = read_vec(s, at, bp::digest_len(mh.checksum)? as u64)?;
        bp::verify_checksum(mh.checksum, &data, &stored).context("metadata")?;
    }
    Ok((bp::decode_meta(&mh, &data)?, mh.section_len()?))
}

/// The chunk positions the offsets table at `*pos` gives, when the file
/// has one and it is complete (`None`: the chunks must be walked); `*pos`
/// is moved past the table.
fn offsets(s: &dyn Source, h: &Header, pos: &mut u64) -> Result<Option<Vec<u64>>> {
    if !h.offsets {
        return Ok(None);
    }
    ensure!(
        h.nchunks >= 0,
        corrupt,
        "offsets flagged but the number of chunks is unknown"
    );
    let total = (h.nchunks as u64)
        .checked_add(h.max_app_chunks as u64)
        .filter(|&t| t <= MAX_CHUNKS && t * 8 <= s.len())
        .ok_or_else(|| {
            Error::corrupt(format!(
                "offsets table of {} + {} entries does not fit",
                h.nchunks, h.max_app_chunks
            ))
        })?;
    let table = read_vec(s, *pos, total * 8)?;
    *pos += total * 8;
    let offs: Vec<i64> = le_all(&table[..h.nchunks as usize * 8]).collect();
    Ok(offs
        .iter()
        .all(|&o| o >= 0)
        .then(|| offs.iter().map(|&o| o as u64).collect()))
}

/// The index entries of the chunks starting at `starts`: each runs to the
/// next (the last to the end of the file), less its digest.
fn entries(s: &dyn Source, h: &Header, starts: &[u64], dlen: u64) -> Result<Vec<ChunkEntry>> {
    let mut chunks = Vec::with_capacity(starts.len());
    let mut uoff = 0u64;
    let n = starts.len();
    for (i, &at) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(s.len());
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
    Ok(chunks)
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
