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

/// Can [`decode_direct`] decode `meta`'s chunks? When the pipeline is one
/// compressor that decodes into a buffer of the chunk's size, with only
/// checksums after it and nothing before it to undo (no byte swap, no
/// filter): zarr-python 3's default (zstd), and v2's zstd, lz4, zlib and
/// gzip compressors.
pub fn direct(meta: &ArrayMeta) -> bool {
    let (first, rest) = match meta.codecs.split_first() {
        Some(x) => x,
        None => return false,
    };
    let one = matches!(first, Codec::Zstd | Codec::Lz4 | Codec::Zlib | Codec::Gzip);
    one && rest.iter().all(|c| *c == Codec::Crc32c) && !meta.swap && meta.filters.is_empty()
}

/// A chunk of a [`direct`] pipeline decoded straight into `out` (a buffer
/// of the chunk's size, whose old contents are overwritten): the
/// checksums checked, then the compressor's stream decoded into `out`,
/// which it must fill exactly.
pub fn decode_direct(meta: &ArrayMeta, mut raw: &[u8], out: &mut [u8]) -> Result<()> {
    let (n, stored) = (out.len() as u64, meta.stored_bytes());
    if n != stored {
        return Err(Error::corrupt(format!(
            "chunk buffer of {n} bytes, expected {stored}"
        )));
    }
    for _ in 1..meta.codecs.len() {
        raw = crc_body(raw)?;
    }
    match meta.codecs.first() {
        Some(c) => decompress_into(*c, raw, out),
        None => Err(Error::corrupt("chunk pipeline not decodable in place")),
    }
}

/// Compressor `c`'s stream `src` decoded into all of `out`, which it must
/// fill exactly (zstd, zlib, gzip, numcodecs' lz4).
fn decompress_into(c: Codec, src: &[u8], out: &mut [u8]) -> Result<()> {
    let p = Params::default();
    match c {
        Codec::Zstd => bcodec::decompress(Stream::Zstd, src, out, &p),
        Codec::Zlib => bcodec::decompress(Stream::Zlib, src, out, &p),
        Codec::Gzip => gunzip_into(src, out),
        Codec::Lz4 => {
            let n = out.len() as u64;
            Want {
                exact: Some(n),
                max: n,
            }
            .check(lz4_size(src)?, "lz4 size")?;
            bcodec::decompress(Stream::Lz4, &src[4..], out, &p)
        }
        _ => Err(Error::corrupt(format!(
            "{} is not decoded in place",
            name(c)
        ))),
    }
}

/// The decoded size a numcodecs LZ4 stream starts with (4 bytes,
/// little-endian; the LZ4 block follows).
fn lz4_size(src: &[u8]) -> Result<u64> {
    src.get(..4)
        .map(|h| u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as u64)
        .ok_or_else(|| Error::truncated("lz4 chunk shorter than its size"))
}

/// A gzip stream that inflates to exactly `out`.
fn gunzip_into(src: &[u8], out: &mut [u8]) -> Result<()> {
    let mut r = flate2::read::GzDecoder::new(src);
    let bad = |e: std::io::Error| Error::corrupt(format!("gzip: {e}"));
    r.read_exact(out).map_err(bad)?;
    let mut more = [0u8; 1];
    match r.read(&mut more).map_err(bad)? {
        0 => Ok(()),
        _ => Err(Error::corrupt(format!(
            "gzip decodes to more than {} bytes",
            out.len()
        ))),
    }
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
    let out = match (c, want.exact) {
        (Codec::Crc32c, _) => return crc_stripped(src, want),
        (Codec::Shuffle(n), _) => filters::unshuffle(src, n)?,
        (Codec::Blosc, _) => blosc(&src, want)?,
        // Of a known size (numcodecs' lz4 always says it): decoded into a
        // buffer of that size, as in place.
        (Codec::Lz4, _) => {
            let n = lz4_size(&src)?;
            want.check(n, "lz4 size")?;
            sized(c, &src, n)?
        }
        (Codec::Zstd | Codec::Gzip | Codec::Zlib, Some(n)) => sized(c, &src, n)?,
        (Codec::Zstd, None) => zstd::bulk::decompress(&src, want.max as usize)
            .map_err(|e| Error::corrupt(format!("zstd: {e}")))?,
        (Codec::Gzip, None) => inflate(flate2::read::GzDecoder::new(&src[..]), want, "gzip")?,
        (Codec::Zlib, None) => inflate(flate2::read::ZlibDecoder::new(&src[..]), want, "zlib")?,
    };
    want.check(out.len() as u64, name(c))?;
    Ok(out)
}

/// Compressor `c`'s stream `src` decoded into a new buffer of `n` bytes.
fn sized(c: Codec, src: &[u8], n: u64) -> Result<Vec<u8>> {
    let mut out = vec![0u8; n as usize];
    decompress_into(c, src, &mut out)?;
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

/// Everything `r` inflates to, reading no more than `want` allows.
fn inflate(r: impl Read, want: Want, what: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(want.exact.unwrap_or(0) as usize);
    r.take(want.max + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::corrupt(format!("{what}: {e}")))?;
    Ok(out)
}

fn crc_stripped(mut src: Vec<u8>, want: Want) -> Result<Vec<u8>> {
    let body = crc_body(&src)?.len();
    src.truncate(body);
    want.check(body as u64, "crc32c")?;
    Ok(src)
}

/// What precedes the CRC-32C that ends `src`, once it matches.
fn crc_body(src: &[u8]) -> Result<&[u8]> {
    let n = src
        .len()
        .checked_sub(4)
        .ok_or_else(|| Error::truncated("chunk shorter than its crc32c"))?;
    let (body, t) = src.split_at(n);
    let stored = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
    let actual = crc32c(body);
    if stored != actual {
        return Err(Error::checksum(format!(
            "crc32c {actual:08x}, stored {stored:08x}"
        )));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// 14 bytes, one chunk of `uint8`, compressed by `codecs` (v3 JSON).
    fn v3(codecs: &str) -> ArrayMeta {
        let doc = format!(
            r#"{{"zarr_format": 3, "node_type": "array", "shape": [14],
            "data_type": "uint8", "fill_value": 0,
            "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [14]}}}},
            "chunk_key_encoding": {{"name": "default"}}, "codecs": [{codecs}]}}"#
        );
        ArrayMeta::parse(doc.as_bytes(), false).unwrap()
    }

    fn v2(compressor: &str) -> ArrayMeta {
        let doc = format!(
            r#"{{"zarr_format": 2, "shape": [14], "chunks": [14], "dtype": "|u1",
            "order": "C", "fill_value": 0, "filters": null, "compressor": {compressor}}}"#
        );
        ArrayMeta::parse(doc.as_bytes(), true).unwrap()
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// numcodecs' LZ4 frame of at most 15 bytes: the size, then a block of
    /// one literal run.
    fn lz4(data: &[u8]) -> Vec<u8> {
        let mut v = (data.len() as u32).to_le_bytes().to_vec();
        v.push((data.len() as u8) << 4);
        v.extend_from_slice(data);
        v
    }

    fn with_crc(mut v: Vec<u8>) -> Vec<u8> {
        let c = crc32c(&v);
        v.extend_from_slice(&c.to_le_bytes());
        v
    }

    /// The common one-compressor pipelines decode straight into the
    /// chunk's buffer, checksums checked; a stream of one byte more or
    /// less than the chunk, or a checksum that does not match, is an
    /// error.
    #[test]
    fn one_compressor_pipelines_decode_in_place_exactly() {
        let data: Vec<u8> = (0..14).collect();
        let zstd = |d: &[u8]| zstd::bulk::compress(d, 3).unwrap();
        let (bytes, crc) = (r#"{"name": "bytes"}"#, r#"{"name": "crc32c"}"#);
        let z = r#"{"name": "zstd", "configuration": {"level": 0, "checksum": false}}"#;
        let g = r#"{"name": "gzip", "configuration": {"level": 5}}"#;
        type Enc = fn(&[u8]) -> Vec<u8>;
        let cases: [(ArrayMeta, Enc); 6] = [
            (v3(&format!("{bytes}, {z}")), zstd),
            (v3(&format!("{bytes}, {z}, {crc}")), |d| {
                with_crc(zstd::bulk::compress(d, 3).unwrap())
            }),
            (v3(&format!("{bytes}, {g}")), gzip),
            (v2(r#"{"id": "zlib", "level": 1}"#), zlib),
            (v2(r#"{"id": "gzip", "level": 1}"#), gzip),
            (v2(r#"{"id": "lz4", "acceleration": 1}"#), lz4),
        ];
        for (i, (meta, enc)) in cases.iter().enumerate() {
            assert!(direct(meta), "case {i}");
            assert_eq!(decode_chunk(meta, enc(&data)).unwrap(), data, "case {i}");
            let longer = [&data[..], &[0]].concat();
            assert!(
                decode_chunk(meta, enc(&longer)).is_err(),
                "case {i}: a byte more"
            );
            assert!(
                decode_chunk(meta, enc(&data[1..])).is_err(),
                "case {i}: a byte less"
            );
            // The same into a buffer of the chunk's size.
            let mut out = [0xAAu8; 14];
            decode_direct(meta, &enc(&data), &mut out).unwrap();
            assert_eq!(out[..], data[..], "case {i} in place");
            assert!(
                decode_direct(meta, &enc(&longer), &mut out).is_err(),
                "case {i}"
            );
            assert!(
                decode_direct(meta, &enc(&data[1..]), &mut out).is_err(),
                "case {i}"
            );
        }
        let mut bad = with_crc(zstd(&data));
        *bad.last_mut().unwrap() ^= 1;
        let e = decode_direct(&cases[1].0, &bad, &mut [0u8; 14]).unwrap_err();
        assert_eq!(e.kind, blosc_decode::ErrorKind::Checksum, "{e}");
        let e = decode_chunk(&cases[1].0, bad).unwrap_err();
        assert_eq!(e.kind, blosc_decode::ErrorKind::Checksum, "{e}");
    }

    /// Byte swaps, filters, Blosc and two compressors take the pipeline.
    #[test]
    fn other_pipelines_are_not_decoded_in_place() {
        let z = r#"{"name": "zstd", "configuration": {"level": 0, "checksum": false}}"#;
        let g = r#"{"name": "gzip", "configuration": {"level": 5}}"#;
        let bytes = r#"{"name": "bytes"}"#;
        assert!(!direct(&v3(&format!("{bytes}, {z}, {g}"))));
        assert!(!direct(&v3(bytes)));
        assert!(!direct(&v2(
            r#"{"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}"#
        )));
        let mut swapped = v3(&format!("{bytes}, {z}"));
        swapped.swap = true;
        assert!(!direct(&swapped));
    }
}
