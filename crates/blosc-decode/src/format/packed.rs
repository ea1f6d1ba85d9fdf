//! The early Blosc2 packed super-chunk: a 96-byte header, then special
//! chunks and data chunks, found through a 'data starts' block of int64
//! positions counted from the start of the header. Byte offsets follow the
//! specification's diagram: version u8 @0, cname u16 @4, clevel u16 @6,
//! filters u16 @8, f_meta u16 @10, chunksize u32 @12, nchunks/nbytes/cbytes
//! u64 @16/24/32, special-chunk positions int64 @40..88 (72: data starts).

use crate::ensure;
use crate::error::Result;

pub const HEADER_LEN: usize = 96;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedHeader {
    pub version: u8,
    pub cname: u16,
    pub clevel: u16,
    /// Five 3-bit filter codes.
    pub filters: u16,
    pub chunksize: u32,
    pub nchunks: u64,
    pub nbytes: u64,
    pub cbytes: u64,
    pub filters_chunk: i64,
    pub codec_chunk: i64,
    pub metadata_chunk: i64,
    pub userdata_chunk: i64,
    pub data_starts: i64,
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes(b[i..i + 2].try_into().unwrap())
}
fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().unwrap())
}

pub fn parse_header(b: &[u8]) -> Result<PackedHeader> {
    ensure!(
        b.len() >= HEADER_LEN,
        truncated,
        "packed super-chunk header needs 96 bytes, got {}",
        b.len()
    );
    let h = PackedHeader {
        version: b[0],
        cname: u16_at(b, 4),
        clevel: u16_at(b, 6),
        filters: u16_at(b, 8),
        chunksize: u32::from_le_bytes(b[12..16].try_into().unwrap()),
        nchunks: u64_at(b, 16),
        nbytes: u64_at(b, 24),
        cbytes: u64_at(b, 32),
        filters_chunk: u64_at(b, 40) as i64,
        codec_chunk: u64_at(b, 48) as i64,
        metadata_chunk: u64_at(b, 56) as i64,
        userdata_chunk: u64_at(b, 64) as i64,
        data_starts: u64_at(b, 72) as i64,
    };
    Ok(h)
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
        && u64_at(head, 80) == 0
        && u64_at(head, 88) == 0
        && ds >= HEADER_LEN as i64
        && (ds as u64) <= len
        && h.nchunks <= (len - ds as u64) / 8
        && (h.nchunks > 0 || h.nbytes == 0 || h.chunksize > 0)
}

pub fn filter_codes(filters: u16) -> [u8; 5] {
    let mut f = [0u8; 5];
    for (i, x) in f.iter_mut().enumerate() {
        *x = ((filters >> (3 * i)) & 0x7) as u8;
    }
    f
}
