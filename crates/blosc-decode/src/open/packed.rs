//! The early Blosc2 packed super-chunk.

use crate::bytes::le_all;
use crate::ensure;
use crate::error::{Context, Error, Result};
use crate::format::chunk::{ChunkHeader, EXTENDED_HEADER_LEN};
use crate::format::packed::{self, HEADER_LEN};
use crate::index::{ChunkEntry, ChunkLoc, Index, Info};
use crate::io::{read_vec, Source};
use std::sync::Arc;

/// Open the packed super-chunk in `src`: its chunks as an `Index`.
pub fn open(src: Arc<dyn Source>) -> Result<Index> {
    let s = src.as_ref();
    let h = packed::parse_header(&read_vec(s, 0, HEADER_LEN as u64)?)?;
    ensure!(
        h.cbytes <= s.len(),
        truncated,
        "packed super-chunk declares {} bytes, file has {}",
        h.cbytes,
        s.len()
    );
    let ds = u64::try_from(h.data_starts)
        .map_err(|_| Error::corrupt("negative data-starts position"))?;
    ensure!(
        ds >= HEADER_LEN as u64 && h.nchunks <= s.len().saturating_sub(ds) / 8,
        corrupt,
        "data-starts block ({} entries at {ds}) does not fit in the file",
        h.nchunks
    );
    let table = read_vec(s, ds, h.nchunks * 8)?;
    let mut chunks = Vec::with_capacity(h.nchunks as usize);
    let mut uoff = 0u64;
    for (i, at) in le_all::<i64>(&table).enumerate() {
        let at = u64::try_from(at)
            .ok()
            .filter(|&a| a >= HEADER_LEN as u64 && a < s.len())
            .ok_or_else(|| {
                Error::corrupt(format!("data chunk position {at} is outside the file"))
                    .in_chunk(i as u64)
            })?;
        let n = (EXTENDED_HEADER_LEN as u64).min(s.len() - at);
        let ch = ChunkHeader::parse(&read_vec(s, at, n)?).in_chunk(i as u64)?;
        chunks.push(ChunkEntry {
            chunk: i as u64,
            uoff,
            ulen: ch.nbytes as u64,
            loc: ChunkLoc::Stored {
                src: 0,
                offset: at,
                cbytes: s.len() - at,
            },
            checksum: None,
        });
        uoff += ch.nbytes as u64;
    }
    let filters = packed::filter_codes(h.filters)
        .iter()
        .filter(|&&f| f != 0)
        .map(|&f| crate::describe::filter_name(f))
        .collect();
    let info = Info {
        format: "blosc2-packed".into(),
        version: h.version as u32,
        typesize: 0,
        chunksize: h.chunksize as u64,
        nchunks: h.nchunks,
        nbytes: uoff,
        cbytes: s.len(),
        codec: String::new(),
        filters,
        metalayers: Vec::new(),
        vlmetalayers: Vec::new(),
        vlmetalayers_unreadable: false,
        extra: vec![("clevel".into(), h.clevel.to_string())],
    };
    Ok(Index {
        sources: vec![src],
        chunks,
        info,
        sizes_assumed: false,
    })
}
