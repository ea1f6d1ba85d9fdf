//! Zarr v3 `zarr.json` of an array (regular grid, no sharding).

use super::{dims, fill, text, ArrayMeta, Codec, DataType, KeyEncoding};
use crate::{Error, Result};
use serde_json::Value;

pub(super) fn parse(doc: &Value) -> Result<ArrayMeta> {
    if doc.get("zarr_format").and_then(Value::as_u64) != Some(3) {
        return Err(Error::unsupported("a zarr.json whose zarr_format is not 3"));
    }
    if text(doc, "node_type")? != "array" {
        return Err(Error::unsupported("a zarr.json of a group, not an array"));
    }
    if let Some(t) = doc.get("storage_transformers").and_then(Value::as_array) {
        if !t.is_empty() {
            return Err(Error::unsupported("storage transformers"));
        }
    }
    let shape = dims(doc.get("shape").unwrap_or(&Value::Null), "shape")?;
    let dtype = data_type(doc.get("data_type").unwrap_or(&Value::Null))?;
    let grid = doc.get("chunk_grid").unwrap_or(&Value::Null);
    if text(grid, "name")? != "regular" {
        return Err(Error::unsupported(format!("chunk grid {}", grid["name"])));
    }
    let chunks = dims(&grid["configuration"]["chunk_shape"], "chunk_shape")?;
    let keys = key_encoding(doc.get("chunk_key_encoding").unwrap_or(&Value::Null))?;
    let list = doc
        .get("codecs")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::corrupt("no codecs"))?;
    let (swap, codecs) = pipeline(list, &dtype)?;
    let fv = doc.get("fill_value").unwrap_or(&Value::Null);
    if fv.is_null() {
        return Err(Error::corrupt("no fill_value"));
    }
    Ok(ArrayMeta {
        zarr_format: 3,
        fill: fill::bytes(fv, &dtype)?,
        fill_text: fv.to_string(),
        shape,
        chunks,
        dtype,
        keys,
        swap,
        codecs,
        codec_names: list.iter().map(Value::to_string).collect(),
    })
}

/// The core data types, presented little-endian.
fn data_type(v: &Value) -> Result<DataType> {
    let name = v
        .as_str()
        .ok_or_else(|| Error::unsupported(format!("data type {v}")))?;
    let (kind, size) = match name {
        "bool" => (b'b', 1),
        "int8" => (b'i', 1),
        "int16" => (b'i', 2),
        "int32" => (b'i', 4),
        "int64" => (b'i', 8),
        "uint8" => (b'u', 1),
        "uint16" => (b'u', 2),
        "uint32" => (b'u', 4),
        "uint64" => (b'u', 8),
        "float16" => (b'f', 2),
        "float32" => (b'f', 4),
        "float64" => (b'f', 8),
        "complex64" => (b'c', 8),
        "complex128" => (b'c', 16),
        other => return Err(Error::unsupported(format!("data type {other:?}"))),
    };
    Ok(DataType {
        kind,
        size,
        big_endian: false,
    })
}

fn key_encoding(v: &Value) -> Result<KeyEncoding> {
    let (prefix, default_sep) = match text(v, "name")? {
        "default" => (true, "/"),
        "v2" => (false, "."),
        other => return Err(Error::unsupported(format!("chunk key encoding {other:?}"))),
    };
    let sep = match v["configuration"]["separator"]
        .as_str()
        .unwrap_or(default_sep)
    {
        "/" => b'/',
        "." => b'.',
        s => return Err(Error::corrupt(format!("chunk key separator {s:?}"))),
    };
    Ok(KeyEncoding { prefix, sep })
}

/// The codec list: one `bytes` codec (no array-to-array codec before it),
/// then bytes-to-bytes codecs. Returns whether values are stored
/// big-endian, and the bytes-to-bytes codecs.
fn pipeline(list: &[Value], dt: &DataType) -> Result<(bool, Vec<Codec>)> {
    let name = |c: &Value| c.get("name").and_then(Value::as_str).map(str::to_string);
    let first = list.first().ok_or_else(|| Error::corrupt("no codecs"))?;
    let big = match name(first).as_deref() {
        Some("bytes") => match first["configuration"]["endian"].as_str() {
            Some("big") => dt.size > 1,
            Some("little") => false,
            None if dt.size == 1 => false,
            e => return Err(Error::corrupt(format!("bytes codec endian {e:?}"))),
        },
        Some(other) => return Err(Error::unsupported(format!("codec {other:?}"))),
        None => return Err(Error::corrupt(format!("codec {first}"))),
    };
    let mut codecs = Vec::new();
    for c in &list[1..] {
        codecs.push(match name(c).as_deref() {
            Some("blosc") => Codec::Blosc,
            Some("zstd") => Codec::Zstd,
            Some("gzip") => Codec::Gzip,
            Some("crc32c") => Codec::Crc32c,
            Some("numcodecs.zlib") => Codec::Zlib,
            Some("numcodecs.lz4") => Codec::Lz4,
            Some(other) => return Err(Error::unsupported(format!("codec {other:?}"))),
            None => return Err(Error::corrupt(format!("codec {c}"))),
        });
    }
    Ok((big, codecs))
}
