//! An array's metadata, from v2 `.zarray` ([`v2`]) or v3 `zarr.json`
//! ([`v3`]), validated: every size a reader allocates by is checked here.

pub mod dtype;
pub(crate) mod fill;
pub mod filter;
pub mod shard;
mod v2;
mod v3;

use crate::{Error, Result};
pub use dtype::DataType;
pub use filter::Filter;
use serde_json::Value;
pub use shard::ShardMeta;

/// Most dimensions an array may have (NumPy's limit).
pub const MAX_NDIM: usize = 64;
/// Largest decoded chunk accepted, in bytes.
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;
/// Largest metadata document read, in bytes.
pub const MAX_META_BYTES: u64 = 1 << 20;

/// One codec of the bytes-to-bytes pipeline, in the order it was applied
/// when the chunk was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Blosc,
    Zstd,
    Gzip,
    Zlib,
    /// numcodecs' LZ4: a 4-byte little-endian size, then an LZ4 block.
    Lz4,
    /// A CRC-32C of what precedes it, appended (4 bytes, little-endian).
    Crc32c,
    /// numcodecs' byte shuffle of elements of this many bytes.
    Shuffle(u64),
}

/// How chunk keys are spelt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyEncoding {
    /// Keys start with `c` and the separator (v3's default encoding).
    pub prefix: bool,
    /// `.` or `/`.
    pub sep: u8,
}

/// What a reader needs to know of an array.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayMeta {
    /// 2 or 3.
    pub zarr_format: u8,
    pub shape: Vec<u64>,
    pub chunks: Vec<u64>,
    pub dtype: DataType,
    /// One element of the fill value, in the presented byte order.
    pub fill: Vec<u8>,
    /// The fill value as the metadata writes it.
    pub fill_text: String,
    pub keys: KeyEncoding,
    /// The array-to-array steps, in the order they were applied.
    pub filters: Vec<Filter>,
    /// The element type the bytes codecs were given (after the filters).
    pub stored: DataType,
    /// Are chunk values stored in the other byte order than `stored`
    /// (v3's `bytes` codec with another `endian`)?
    pub swap: bool,
    pub codecs: Vec<Codec>,
    /// The codecs as the metadata names them (for `info`; a sharded
    /// array's inner codecs).
    pub codec_names: Vec<String>,
    /// How the grid's chunks hold inner chunks (v3 `sharding_indexed`);
    /// `chunks` and `codecs` are then the inner chunks'.
    pub shard: Option<ShardMeta>,
}

impl ArrayMeta {
    /// Parse and validate an array's metadata document: `.zarray` when
    /// `v2`, else `zarr.json`.
    pub fn parse(text: &[u8], v2: bool) -> Result<ArrayMeta> {
        ArrayMeta::parse_node(text, v2)?
            .ok_or_else(|| Error::unsupported("a zarr.json of a group, not an array"))
    }

    /// [`ArrayMeta::parse`], with `Ok(None)` for a v3 group's `zarr.json`.
    pub fn parse_node(text: &[u8], v2: bool) -> Result<Option<ArrayMeta>> {
        let doc: Value = serde_json::from_slice(text)
            .map_err(|e| Error::corrupt(format!("metadata is not JSON: {e}")))?;
        ArrayMeta::from_json(&doc, v2)
    }

    /// [`ArrayMeta::parse_node`] of a document already parsed (an entry of
    /// consolidated metadata).
    pub fn from_json(doc: &Value, v2: bool) -> Result<Option<ArrayMeta>> {
        if !v2 && doc.get("node_type").and_then(Value::as_str) == Some("group") {
            return Ok(None);
        }
        let m = if v2 { v2::parse(doc)? } else { v3::parse(doc)? };
        m.check()?;
        Ok(Some(m))
    }

    /// The checks every size rests on.
    fn check(&self) -> Result<()> {
        if self.shape.len() != self.chunks.len() {
            return Err(Error::corrupt(format!(
                "{} dimensions but a chunk shape of {}",
                self.shape.len(),
                self.chunks.len()
            )));
        }
        if self.chunks.contains(&0) {
            return Err(Error::corrupt("a chunk dimension of 0"));
        }
        let stored = product(&self.chunks, self.stored.size)
            .ok_or_else(|| Error::corrupt("chunks too large"))?;
        let chunk = self.chunk_bytes_checked()?.max(stored);
        if chunk > MAX_CHUNK_BYTES {
            return Err(Error::unsupported(format!(
                "chunks of {chunk} bytes (at most {MAX_CHUNK_BYTES})"
            )));
        }
        product(&self.shape, self.dtype.size).ok_or_else(|| Error::corrupt("array too large"))?;
        Ok(())
    }

    fn chunk_bytes_checked(&self) -> Result<u64> {
        product(&self.chunks, self.dtype.size).ok_or_else(|| Error::corrupt("chunks too large"))
    }

    /// Bytes of one decoded chunk (validated: at most [`MAX_CHUNK_BYTES`]).
    pub fn chunk_bytes(&self) -> u64 {
        product(&self.chunks, self.dtype.size).unwrap_or(u64::MAX)
    }

    /// Bytes of one chunk as the bytes codecs were given it (validated:
    /// at most [`MAX_CHUNK_BYTES`]).
    pub fn stored_bytes(&self) -> u64 {
        product(&self.chunks, self.stored.size).unwrap_or(u64::MAX)
    }

    /// The element type the filters turn `dtype` into, each checked to
    /// take what the one before it gives.
    pub(crate) fn stored_type(dtype: &DataType, filters: &[Filter]) -> Result<DataType> {
        filters
            .iter()
            .try_fold(dtype.clone(), |cur, f| f.encoded(&cur))
    }

    /// Bytes of the whole array's values (validated to fit in a `u64`).
    pub fn data_bytes(&self) -> u64 {
        product(&self.shape, self.dtype.size).unwrap_or(u64::MAX)
    }
}

/// `dims` multiplied together and by `unit`, if it fits.
pub(crate) fn product(dims: &[u64], unit: u64) -> Option<u64> {
    dims.iter().try_fold(unit, |a, &d| a.checked_mul(d))
}

/// A list of dimensions (non-negative integers, at most [`MAX_NDIM`]).
pub(crate) fn dims(v: &Value, what: &str) -> Result<Vec<u64>> {
    let list = v
        .as_array()
        .ok_or_else(|| Error::corrupt(format!("{what} is not a list")))?;
    if list.len() > MAX_NDIM {
        return Err(Error::unsupported(format!(
            "{what} of {} dimensions",
            list.len()
        )));
    }
    list.iter()
        .map(|d| {
            d.as_u64()
                .ok_or_else(|| Error::corrupt(format!("{what}: {d} is not a dimension")))
        })
        .collect()
}

/// The string at `key` of `obj`.
pub(crate) fn text<'a>(obj: &'a Value, key: &str) -> Result<&'a str> {
    obj.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Error::corrupt(format!("no text {key:?}")))
}

#[cfg(test)]
mod tests;
