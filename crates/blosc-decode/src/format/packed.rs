//! The early Blosc2 packed super-chunk: a 96-byte header, then special
//! chunks and data chunks, found through a 'data starts' block of int64
//! positions counted from the start of the header. Byte offsets follow the
//! specification's diagram: version u8 @0, cname u16 @4, clevel u16 @6,
//! filters u16 @8, f_meta u16 @10, chunksize u32 @12, nchunks/nbytes/cbytes
//! u64 @16/24/32, special-chunk positions int64 @40..88 (72: data starts).

use crate::bytes::{le_at, Reader};
use crate::ensure;
use crate::error::Result;

/// Bytes of the header.
pub const HEADER_LEN: usize = 96;

/// The header of a packed super-chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedHeader {
    /// Format version.
    pub version: u8,
    /// Codec id.
    pub cname: u16,
    /// Compression level.
    pub clevel: u16,
    /// Five 3-bit filter codes.
    pub filters: u16,
    /// Uncompressed bytes of one chunk.
    pub chunksize: u32,
    /// Number of chunks.
    pub nchunks: u64,
    /// Uncompressed bytes.
    pub nbytes: u64,
    /// Compressed bytes.
    pub cbytes: u64,
    /// Position of the filters chunk.
    pub filters_chunk: i64,
    /// Position of the codec chunk.
    pub codec_chunk: i64,
    /// Position of the metadata chunk.
    pub metadata_chunk: i64,
    /// Position of the user-data chunk.
    pub userdata_chunk: i64,
    /// Position of the data-starts block.
    pub data_starts: i64,
}

/// Parse the 96-byte header.
pub fn parse_header(b: &[u8]) -> Result<PackedHeader> {
    ensure!(
        b.len() >= HEADER_LEN,
        truncated,
        "packed super-chunk header needs 96 bytes, got {}",
        b.len()
    );
    let mut r = Reader::new(b, "packed super-chunk header");
    let version = r.u8()?;
    r.skip(3)?;
    let cname = r.le()?;
    let clevel = r.le()?;
    let filters = r.le()?;
    r.skip(2)?; // f_meta
    Ok(PackedHeader {
        version,
        cname,
        clevel,
        filters,
        chunksize: r.le()?,
        nchunks: r.le()?,
        nbytes: r.le()?,
        cbytes: r.le()?,
        filters_chunk: r.le()?,
        codec_chunk: r.le()?,
        metadata_chunk: r.le()?,
        userdata_chunk: r.le()?,
        data_starts: r.le()?,
    })
}

/// Does `head` (of a file `len` bytes long) look like a packed super-chunk?
/// There is no magic: the header must be self-consistent with the file.
pub fn looks_packed(head: &[u8], len: u64) -> bool {
    let Ok(h) = parse_header(head) else {
        return false;
    };
    let ds = h.data_starts;
    (1..=5).contains(&h.version)
        && b"\0\0\0" == &head[1..4]
        && h.cbytes == len
        && h.cname <= 5
        && le_at::<u64>(head, 80) == Some(0)
        && le_at::<u64>(head, 88) == Some(0)
        && ds >= HEADER_LEN as i64
        && (ds as u64) <= len
        && h.nchunks <= (len - ds as u64) / 8
        && (h.nchunks > 0 || h.nbytes == 0 || h.chunksize > 0)
}

/// The five 3-bit filter codes of `filters`, first slot first.
pub fn filter_codes(filters: u16) -> [u8; 5] {
    let mut f = [0u8; 5];
    for (i, x) in f.iter_mut().enumerate() {
        *x = ((filters >> (3 * i)) & 0x7) as u8;
    }
    f
}
