//! Zarr v3 `zarr.json` of an array (regular grid; `sharding_indexed` as
//! its one codec, see [`super::shard`]).

use super::{
    dims, dtype, fill, filter, shard, text, ArrayMeta, Codec, DataType, Filter, KeyEncoding,
};
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
    let dtype = dtype::v3(doc.get("data_type").unwrap_or(&Value::Null))?;
    let grid = doc.get("chunk_grid").unwrap_or(&Value::Null);
    if text(grid, "name")? != "regular" {
        return Err(Error::unsupported(format!("chunk grid {}", grid["name"])));
    }
    let mut chunks = dims(&grid["configuration"]["chunk_shape"], "chunk_shape")?;
    let keys = key_encoding(doc.get("chunk_key_encoding").unwrap_or(&Value::Null))?;
    let mut list = doc
        .get("codecs")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::corrupt("no codecs"))?
        .as_slice();
    let mut sharded = None;
    if let [c] = list {
        if c.get("name").and_then(Value::as_str) == Some("sharding_indexed") {
            let s = shard::parse(&c["configuration"], &chunks)?;
            (chunks, list) = (s.inner, s.codecs);
            sharded = Some(s.meta);
        }
    }
    let p = pipeline(list, &dtype, &chunks)?;
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
        filters: p.filters,
        stored: p.stored,
        swap: p.big,
        codecs: p.codecs,
        codec_names: list.iter().map(Value::to_string).collect(),
        shard: sharded,
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

/// The decoded form of a v3 codec list: array-to-array steps, the
/// element type they leave, whether the `bytes` codec stores it
/// big-endian, and the bytes-to-bytes codecs.
struct Pipeline {
    filters: Vec<Filter>,
    stored: DataType,
    big: bool,
    codecs: Vec<Codec>,
}

/// The codec list: array-to-array codecs (`transpose`, numcodecs'), one
/// `bytes` codec, then bytes-to-bytes codecs.
fn pipeline(list: &[Value], dt: &DataType, chunks: &[u64]) -> Result<Pipeline> {
    let name = |c: &Value| c.get("name").and_then(Value::as_str).map(str::to_string);
    let mut filters = Vec::new();
    let mut shape = chunks.to_vec();
    let mut rest = list.iter();
    let serializer = loop {
        let c = rest
            .next()
            .ok_or_else(|| Error::corrupt("no bytes codec"))?;
        let conf = c.get("configuration").unwrap_or(&Value::Null);
        match name(c).as_deref() {
            Some("bytes") => break c,
            Some("transpose") => {
                let (f, after) = filter::transpose(conf, &shape)?;
                filters.push(f);
                shape = after;
            }
            Some(n) if n.starts_with("numcodecs.") && n != "numcodecs.shuffle" => {
                filters.push(filter::numcodecs(&n["numcodecs.".len()..], conf)?)
            }
            Some("sharding_indexed") => {
                return Err(Error::unsupported("sharding_indexed beside other codecs"))
            }
            Some(other) => return Err(Error::unsupported(format!("codec {other:?}"))),
            None => return Err(Error::corrupt(format!("codec {c}"))),
        }
    };
    let stored = ArrayMeta::stored_type(dt, &filters)?;
    let big = match serializer["configuration"]["endian"].as_str() {
        Some("big") => stored.swap_unit() > 1,
        Some("little") => false,
        None if stored.swap_unit() == 1 => false,
        e => return Err(Error::corrupt(format!("bytes codec endian {e:?}"))),
    };
    let mut codecs = Vec::new();
    for c in rest {
        codecs.push(match name(c).as_deref() {
            Some("blosc" | "numcodecs.blosc") => Codec::Blosc,
            Some("zstd" | "numcodecs.zstd") => Codec::Zstd,
            Some("gzip" | "numcodecs.gzip") => Codec::Gzip,
            Some("crc32c") => Codec::Crc32c,
            Some("numcodecs.zlib") => Codec::Zlib,
            Some("numcodecs.lz4") => Codec::Lz4,
            Some("numcodecs.shuffle") => match filter::numcodecs("shuffle", &c["configuration"])? {
                Filter::Shuffle(n) => Codec::Shuffle(n),
                _ => return Err(Error::corrupt("numcodecs.shuffle")),
            },
            Some(other) => return Err(Error::unsupported(format!("codec {other:?}"))),
            None => return Err(Error::corrupt(format!("codec {c}"))),
        });
    }
    Ok(Pipeline {
        filters,
        stored,
        big,
        codecs,
    })
}
