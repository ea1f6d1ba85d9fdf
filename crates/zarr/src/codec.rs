//! One chunk's codec pipeline, decoded in reverse. Every step's output is
//! bounded before it is made: exactly the decoded chunk's size where it is
//! known (a compressor applied to the values, after it only checksums),
//! otherwise at most twice the chunk plus 64 KiB.

use crate::crc32c::crc32c;
use crate::filters;
use crate::meta::{fill::swapped, ArrayMeta, Codec};
use crate::{Error, Result};
use blosc_decode::codec::{self as bcodec, Params};
use blosc_decode::format::chunk::Codec as Stream;
use std::io::Read;

/// How long a step's output may be.
#[derive(Debug, Clone, Copy)]
struct Want {
    exact: Option<u64>,
    max: u64,
}

impl Want {
    fn check(&self, n: u64, what: &str) -> Result<()> {
        match self.exact {
            Some(e) if e != n => Err(Error::corrupt(format!(
                "{what} decoded to {n} bytes, expected {e}"
            ))),
            _ if n > self.max => Err(Error::corrupt(format!(
                "{what} decodes to more than {} bytes",
                self.max
            ))),
            _ => Ok(()),
        }
    }
}

/// The values of one stored chunk (`raw`, as the store holds it), in the
/// presented byte order: exactly [`ArrayMeta::chunk_bytes`] bytes, or an
/// error.
pub fn decode_chunk(meta: &ArrayMeta, raw: Vec<u8>) -> Result<Vec<u8>> {
    let stored = meta.stored_bytes();
    let max = stored.saturating_mul(2).saturating_add(1 << 16);
    let mut data = raw;
    for (i, c) in meta.codecs.iter().enumerate().rev() {
        let before = &meta.codecs[..i];
        let crcs = before.iter().filter(|c| **c == Codec::Crc32c).count() as u64;
        let exact = before
            .iter()
            .all(|c| matches!(c, Codec::Crc32c | Codec::Shuffle(_)))
            .then_some(stored + 4 * crcs);
        data = decode_one(*c, data, Want { exact, max })?;
    }
    if data.len() as u64 != stored {
        return Err(Error::corrupt(format!(
            "chunk holds {} bytes, expected {stored}",
            data.len()
        )));
    }
    if meta.swap {
        data = swapped(&data, meta.stored.swap_unit() as usize);
    }
    unfilter(meta, data)
}

/// The array-to-array steps undone, last applied first.
fn unfilter(meta: &ArrayMeta, mut data: Vec<u8>) -> Result<Vec<u8>> {
    // The element type each step was given.
    let mut given = Vec::with_capacity(meta.filters.len());
    let mut cur = meta.dtype.clone();
    for f in &meta.filters {
        let next = f.encoded(&cur)?;
        given.push(cur);
        cur = next;
    }
    for (f, t) in meta.filters.iter().zip(&given).rev() {
        data = filters::undo(f, data, t)?;
    }
    let chunk = meta.chunk_bytes();
    if data.len() as u64 != chunk {
        return Err(Error::corrupt(format!(
            "filters left {} bytes, expected {chunk}",
            data.len()
        )));
    }
    Ok(data)
}

fn decode_one(c: Codec, src: Vec<u8>, want: Want) -> Result<Vec<u8>> {
    let out = match c {
        Codec::Crc32c => return crc_stripped(src, want),
        Codec::Shuffle(n) => filters::unshuffle(src, n)?,
        Codec::Blosc => blosc(&src, want)?,
        Codec::Zstd => zstd::bulk::decompress(&src, want.exact.unwrap_or(want.max) as usize)
            .map_err(|e| Error::corrupt(format!("zstd: {e}")))?,
        Codec::Gzip => inflate(flate2::read::GzDecoder::new(&src[..]), want, "gzip")?,
        Codec::Zlib => inflate(flate2::read::ZlibDecoder::new(&src[..]), want, "zlib")?,
        Codec::Lz4 => lz4(&src, want)?,
    };
    want.check(out.len() as u64, name(c))?;
    Ok(out)
}

fn name(c: Codec) -> &'static str {
    match c {
        Codec::Blosc => "blosc",
        Codec::Zstd => "zstd",
        Codec::Gzip => "gzip",
        Codec::Zlib => "zlib",
        Codec::Lz4 => "lz4",
        Codec::Crc32c => "crc32c",
        Codec::Shuffle(_) => "shuffle",
    }
}

/// A Blosc chunk, through blosc-decode's decoder once its declared size
/// (bytes 4..8 of its header) is what the pipeline expects.
fn blosc(src: &[u8], want: Want) -> Result<Vec<u8>> {
    let nbytes = src
        .get(4..8)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64)
        .ok_or_else(|| Error::truncated("blosc chunk shorter than its header"))?;
    want.check(nbytes, "blosc chunk header")?;
    blosc_decode::decode::decompress_chunk(src)
}

/// numcodecs' LZ4: the decoded size (4 bytes, little-endian), then a block.
fn lz4(src: &[u8], want: Want) -> Result<Vec<u8>> {
    let (head, block) = src
        .split_at_checked(4)
        .ok_or_else(|| Error::truncated("lz4 chunk shorter than its size"))?;
    let n = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as u64;
    want.check(n, "lz4 size")?;
    let mut out = vec![0u8; n as usize];
    bcodec::decompress(Stream::Lz4, block, &mut out, &Params::default())?;
    Ok(out)
}

/// Everything `r` inflates to, reading no more than `want` allows.
fn inflate(r: impl Read, want: Want, what: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(want.exact.unwrap_or(0) as usize);
    r.take(want.max + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::corrupt(format!("{what}: {e}")))?;
    Ok(out)
}

fn crc_stripped(mut src: Vec<u8>, want: Want) -> Result<Vec<u8>> {
    let body = src
        .len()
        .checked_sub(4)
        .ok_or_else(|| Error::truncated("chunk shorter than its crc32c"))?;
    let t = &src[body..];
    let stored = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
    let actual = crc32c(&src[..body]);
    if stored != actual {
        return Err(Error::checksum(format!(
            "crc32c {actual:08x}, stored {stored:08x}"
        )));
    }
    src.truncate(body);
    want.check(body as u64, "crc32c")?;
    Ok(src)
}
