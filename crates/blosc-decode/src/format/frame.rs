//! Blosc2 frames: the msgpack header (with metalayers), the offsets index
//! and the trailer (with variable-length metalayers). Pure parsing over
//! byte slices; `crate::open::frame` does the reading.
//!
//! Layout of a contiguous frame: header | data chunks | offsets chunk |
//! trailer. Offsets count from the end of the header; a negative offset is a
//! special chunk whose top byte is `0x80 | kind` (1 zeros, 2 NaN, 4
//! uninitialised). A sparse frame (`frame_type` 1) keeps the offsets chunk
//! right after the header and its entries are chunk file numbers.

use crate::bytes::{self, be_at, le_all};
use crate::ensure;
use crate::error::{Error, Result};
use crate::format::chunk::Special;
use crate::format::msgpack::{Reader, Val};

/// The magic string of a frame header.
pub const MAGIC: &[u8; 8] = b"b2frame\0";
/// Bytes needed to read `header_len` and `frame_len`.
pub const PREFIX_LEN: usize = 24;
/// Frame headers are small; anything larger is refused.
pub const MAX_HEADER_LEN: u64 = 64 << 20;
/// Bytes at the very end of a frame that give the trailer's length:
/// `ce` u32 `d8` type + 16 fingerprint bytes.
pub const TAIL_LEN: usize = 1 + 4 + 2 + 16;

/// Is this the start of a frame? (fixarray, `b2frame\0` string)
pub fn is_frame(head: &[u8]) -> bool {
    head.len() >= 10 && (head[0] & 0xf0) == 0x90 && head[1] == 0xa8 && &head[2..10] == MAGIC
}

/// A frame header, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameHeader {
    /// Bytes of the header.
    pub header_len: u64,
    /// Bytes of the whole frame.
    pub frame_len: u64,
    /// Frame format version (general_flags bits 0-3).
    pub version: u8,
    /// Chunks of varying sizes?
    pub variable_chunks: bool,
    /// 0 contiguous, 1 sparse (directory).
    pub frame_type: u8,
    /// Library codec id (0 blosclz, 1 lz4, 2 lz4hc, 4 zlib, 5 zstd, ...).
    pub codec: u8,
    /// Compression level.
    pub clevel: u8,
    /// Uncompressed bytes of the frame's content.
    pub nbytes: u64,
    /// Compressed bytes of its chunks.
    pub cbytes: u64,
    /// Bytes of one item.
    pub typesize: u32,
    /// Bytes of one block.
    pub blocksize: u32,
    /// Uncompressed bytes of one chunk.
    pub chunksize: u32,
    /// A trailer with variable-length metalayers follows?
    pub has_vlmetalayers: bool,
    /// Filter pipeline (slot order) and its meta bytes.
    pub filters: Vec<u8>,
    /// Each filter's meta byte.
    pub filters_meta: Vec<u8>,
    /// (name, value bytes) of the fixed metalayers.
    pub metalayers: Vec<(String, Vec<u8>)>,
}

/// `(header_len, frame_len)` from the first `PREFIX_LEN` bytes.
pub fn prefix(head: &[u8]) -> Result<(u64, u64)> {
    ensure!(
        is_frame(head),
        corrupt,
        "not a Blosc2 frame (no b2frame magic)"
    );
    ensure!(
        head.len() >= PREFIX_LEN,
        truncated,
        "frame header is truncated"
    );
    ensure!(
        head[10] == 0xd2 && head[15] == 0xcf,
        corrupt,
        "frame header: unexpected size field types"
    );
    let mut r = bytes::Reader::at(head, 11, "frame header");
    let hl: i32 = r.be()?;
    r.skip(1)?;
    let fl: u64 = r.be()?;
    ensure!(
        hl > 0 && (hl as u64) <= MAX_HEADER_LEN,
        corrupt,
        "frame header length {hl} is not plausible"
    );
    Ok((hl as u64, fl))
}

fn int(v: &Val, what: &str) -> Result<i128> {
    v.as_int()
        .ok_or_else(|| Error::corrupt(format!("frame header: {what} is not an integer")))
}

fn nonneg(v: &Val, what: &str, max: u64) -> Result<u64> {
    let i = int(v, what)?;
    ensure!(
        i >= 0 && (i as u128) <= max as u128,
        corrupt,
        "frame header: {what} = {i} is out of range"
    );
    Ok(i as u64)
}

/// Parse the whole header (`buf` holds at least `header_len` bytes).
pub fn parse_header(buf: &[u8]) -> Result<FrameHeader> {
    let (header_len, frame_len) = prefix(buf)?;
    ensure!(
        buf.len() as u64 >= header_len,
        truncated,
        "frame header needs {header_len} bytes, got {}",
        buf.len()
    );
    let hbuf = &buf[..header_len as usize];
    let vals = fields(hbuf)?;
    // Positional fields: magic, header_size, frame_size, flags, nbytes, cbytes,
    // typesize, [blocksize], chunksize, tcomp, tdecomp, has_vlmeta, [filters], [metalayers]
    let flags = match &vals[3] {
        Val::Str(s) if s.len() >= 3 => *s,
        _ => {
            return Err(Error::corrupt(
                "frame header: flags field is not a 4-byte string",
            ))
        }
    };
    let mut i = 6;
    let typesize = nonneg(&vals[i], "typesize", 255 * 1024)? as u32;
    ensure!(typesize > 0, corrupt, "frame header: typesize is 0");
    i += 1;
    // The field count says whether the block size is there.
    let blocksize = if (hbuf[0] & 0x0f) >= 14 {
        i += 1;
        nonneg(&vals[i - 1], "blocksize", i32::MAX as u64)? as u32
    } else {
        0
    };
    // -1 (or 0) means "not fixed": writers leave -1 before the first chunk.
    let chunksize = int(&vals[i], "chunksize")?.clamp(0, i32::MAX as i128) as u32;
    i += 3; // chunksize, tcomp, tdecomp
    let has_vl = matches!(vals.get(i), Some(Val::Bool(true)));
    i += 1;
    let pipeline = match vals.get(i) {
        Some(Val::Ext(nf, d)) => {
            i += 1;
            Pipeline::parse(*nf, d)?
        }
        _ => Pipeline::default(),
    };
    let mut metalayers = Vec::new();
    if let Some(Val::Array(parts)) = vals.get(i) {
        if let Some(Val::Map(entries)) = parts.get(1) {
            metalayers = named_values(entries, hbuf, "metalayer")?;
        }
    }
    let (general, codec_flags) = (flags[0], flags[2]);
    let h = FrameHeader {
        header_len,
        frame_len,
        version: general & 0x0f,
        variable_chunks: general & 0x40 != 0,
        frame_type: flags[1] & 0x0f,
        // 6 (user-defined codec format): the id is in the pipeline's byte 6.
        codec: match codec_flags & 0x0f {
            6 => pipeline.udcodec,
            c => c,
        },
        clevel: codec_flags >> 4,
        nbytes: nonneg(&vals[4], "uncompressed size", i64::MAX as u64)?,
        cbytes: nonneg(&vals[5], "compressed size", i64::MAX as u64)?,
        typesize,
        blocksize,
        chunksize,
        has_vlmetalayers: has_vl,
        filters: pipeline.filters,
        filters_meta: pipeline.meta,
        metalayers,
    };
    ensure!(
        h.frame_type <= 1,
        unsupported,
        "unsupported frame type {}",
        h.frame_type
    );
    Ok(h)
}

/// The header's top-level msgpack values (at least the 11 every version
/// writes; the fixarray's count may promise more than the bytes hold).
fn fields(hbuf: &[u8]) -> Result<Vec<Val<'_>>> {
    let n = (hbuf[0] & 0x0f) as usize;
    ensure!(n >= 11, corrupt, "frame header has {n} fields, too few");
    let mut r = Reader::at(hbuf, 1);
    let mut vals = Vec::with_capacity(n);
    while vals.len() < n && r.pos() < hbuf.len() {
        vals.push(r.read()?);
    }
    ensure!(
        vals.len() >= 11,
        truncated,
        "frame header ends after {} fields",
        vals.len()
    );
    Ok(vals)
}

/// The filter pipeline field.
#[derive(Default)]
struct Pipeline {
    filters: Vec<u8>,
    meta: Vec<u8>,
    /// The user-defined codec's id.
    udcodec: u8,
}

impl Pipeline {
    /// A fixext 16 whose ext type is the number of filters: bytes 0..8 the
    /// filter ids, 6 the user codec, 7 the codec meta, 8..16 the filters'
    /// meta.
    fn parse(nf: i8, d: &[u8]) -> Result<Pipeline> {
        ensure!(
            d.len() == 16 && (0..=6).contains(&nf),
            corrupt,
            "frame header: bad filter pipeline ({nf} filters in {} bytes)",
            d.len()
        );
        let nf = nf as usize;
        Ok(Pipeline {
            filters: d[..nf].to_vec(),
            meta: d[8..8 + nf].to_vec(),
            udcodec: d[6],
        })
    }
}

impl FrameHeader {
    /// Fixed chunk size, if the frame has one (not variable, and set).
    pub fn fixed_chunksize(&self) -> Option<u64> {
        (!self.variable_chunks && self.chunksize > 0).then_some(self.chunksize as u64)
    }
    /// The number of chunks a fixed-chunk-size frame must hold
    /// (`ceil(nbytes / chunksize)`, as C-Blosc2 computes it), if fixed.
    pub fn fixed_nchunks(&self) -> Option<u64> {
        self.fixed_chunksize().map(|c| self.nbytes.div_ceil(c))
    }
}

/// The uncompressed size a frame declares, from its first 38 bytes (the
/// fixed-position int64 after the flags), without parsing the rest.
pub fn declared_nbytes(head: &[u8]) -> Option<u64> {
    prefix(head).ok()?;
    let b = head.get(24..38)?;
    if b[0] != 0xa4 || b[5] != 0xd3 {
        return None;
    }
    let n: i64 = be_at(b, 6)?;
    u64::try_from(n).ok()
}

/// Codec name for a library codec id (as stored in frame headers).
pub fn codec_name(id: u8) -> String {
    match id {
        0 => "blosclz".into(),
        1 => "lz4".into(),
        2 => "lz4hc".into(),
        3 => "snappy".into(),
        4 => "zlib".into(),
        5 => "zstd".into(),
        33 => "zfp_acc".into(),
        34 => "zfp_prec".into(),
        35 => "zfp_rate".into(),
        n => format!("codec{n}"),
    }
}

/// The trailer length from the frame's last `TAIL_LEN` bytes.
pub fn trailer_len(tail: &[u8]) -> Result<u64> {
    ensure!(
        tail.len() >= TAIL_LEN,
        truncated,
        "frame trailer is truncated"
    );
    let t = &tail[tail.len() - TAIL_LEN..];
    ensure!(
        t[0] == 0xce && t[5] == 0xd8,
        corrupt,
        "frame trailer: bad length marker"
    );
    Ok(bytes::Reader::at(t, 1, "frame trailer").be::<u32>()? as u64)
}

/// Variable-length metalayers from the trailer: (name, raw value chunk bytes).
pub fn parse_trailer(tr: &[u8]) -> Result<Vec<(String, Vec<u8>)>> {
    ensure!(
        !tr.is_empty() && (tr[0] & 0xf0) == 0x90,
        corrupt,
        "frame trailer: not a msgpack array"
    );
    let mut r = Reader::at(tr, 1);
    let _version = r.read()?;
    let mut out = Vec::new();
    if let Val::Array(parts) = r.read()? {
        if let Some(Val::Map(entries)) = parts.get(1) {
            out = named_values(entries, tr, "vlmetalayer")?;
        }
    }
    Ok(out)
}

/// A (vl)metalayer map: names to offsets (into `buf`) of msgpack bin values.
fn named_values(entries: &[(Val, Val)], buf: &[u8], what: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let name = k
            .as_str()
            .ok_or_else(|| Error::corrupt(format!("{what} name is not a string")))?
            .to_string();
        let off = nonneg(v, &format!("{what} offset"), buf.len() as u64)? as usize;
        let value = match Reader::at(buf, off).read()? {
            Val::Bin(b) => b.to_vec(),
            _ => {
                return Err(Error::corrupt(format!(
                    "{what} {name}: value is not binary"
                )))
            }
        };
        out.push((name, value));
    }
    Ok(out)
}

/// One decoded offsets entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offset {
    /// Byte offset from the end of the header (contiguous) or chunk number (sparse).
    At(u64),
    /// A special chunk: no bytes stored.
    Special(Special),
}

/// Decode one offsets entry (negative: a special chunk's kind).
pub fn decode_offset(v: i64) -> Result<Offset> {
    if v >= 0 {
        return Ok(Offset::At(v as u64));
    }
    // As C-Blosc2's frame_special_chunk: bits of the top byte, tested in
    // this order (zeros, then uninitialised, then NaN).
    let top = ((v as u64) >> 56) as u8;
    if top & 0x01 != 0 {
        Ok(Offset::Special(Special::Zeros))
    } else if top & 0x04 != 0 {
        Ok(Offset::Special(Special::Uninit))
    } else if top & 0x02 != 0 {
        Ok(Offset::Special(Special::Nan))
    } else {
        Err(Error::corrupt(format!(
            "chunk offset {v:#x}: negative but no special-value kind"
        )))
    }
}

/// The int64 entries of a decoded offsets chunk, each one for
/// [`decode_offset`].
pub fn offset_values(decoded: &[u8]) -> Result<impl Iterator<Item = i64> + '_> {
    ensure!(
        decoded.len().is_multiple_of(8),
        corrupt,
        "offsets index of {} bytes is not whole int64s",
        decoded.len()
    );
    Ok(le_all(decoded))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Written by python-blosc2 (scripts/fixtures/gen_frame_fixtures.py): metalayers
    // "dims" and "origin", vlmetalayers "note" and "list", lz4 + shuffle.
    const FRAME: &[u8] = include_bytes!("../../../../tests/data/frame/fixed-lz4.b2frame");

    #[test]
    fn header_fields() {
        let h = parse_header(FRAME).unwrap();
        assert_eq!((h.version, h.frame_type, h.variable_chunks), (2, 0, false));
        assert_eq!((h.codec, h.typesize, h.chunksize), (1, 4, 4000));
        assert_eq!(h.nbytes, 10_000);
        assert_eq!(h.frame_len, FRAME.len() as u64);
        assert_eq!(h.filters, [1, 0, 0, 0, 0, 0]); // python-blosc2 fills slots from 0
        assert_eq!(h.fixed_nchunks(), Some(3));
        let names: Vec<_> = h.metalayers.iter().map(|m| m.0.as_str()).collect();
        assert_eq!(names, ["origin", "dims"]);
        assert!(h.has_vlmetalayers);
        assert_eq!(declared_nbytes(&FRAME[..38]), Some(10_000));
        assert_eq!(declared_nbytes(&FRAME[..37]), None);
    }

    #[test]
    fn truncated_header_at_every_length_is_an_error() {
        let hl = prefix(FRAME).unwrap().0 as usize;
        for n in 0..hl {
            assert!(parse_header(&FRAME[..n]).is_err(), "cut at {n}");
        }
    }

    #[test]
    fn trailer() {
        let tl = trailer_len(FRAME).unwrap() as usize;
        let vl = parse_trailer(&FRAME[FRAME.len() - tl..]).unwrap();
        let names: Vec<_> = vl.iter().map(|m| m.0.as_str()).collect();
        assert_eq!(names, ["note", "list"]);
        for n in 0..tl {
            let _ = parse_trailer(&FRAME[FRAME.len() - tl..FRAME.len() - tl + n]);
        }
        assert!(trailer_len(&FRAME[..10]).is_err());
        assert!(trailer_len(&[0u8; 23]).is_err());
    }

    #[test]
    fn special_offsets_follow_c_blosc2() {
        let top = |b: u8| i64::from_be_bytes([b, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(decode_offset(7).unwrap(), Offset::At(7));
        assert_eq!(
            decode_offset(top(0x81)).unwrap(),
            Offset::Special(Special::Zeros)
        );
        assert_eq!(
            decode_offset(top(0x82)).unwrap(),
            Offset::Special(Special::Nan)
        );
        assert_eq!(
            decode_offset(top(0x84)).unwrap(),
            Offset::Special(Special::Uninit)
        );
        // Bit tests, zeros first, as frame_special_chunk does.
        assert_eq!(
            decode_offset(top(0x83)).unwrap(),
            Offset::Special(Special::Zeros)
        );
        assert_eq!(decode_offset(-1).unwrap(), Offset::Special(Special::Zeros));
        assert!(decode_offset(i64::MIN).is_err());
        assert!(decode_offset(top(0x88)).is_err());
        assert!(offset_values(&[0u8; 12]).is_err());
        assert_eq!(offset_values(&[]).unwrap().count(), 0);
    }
}
