//! Zarr v2 `.zarray`.

use super::{dims, fill, text, ArrayMeta, Codec, DataType, KeyEncoding};
use crate::{Error, Result};
use serde_json::Value;

pub(super) fn parse(doc: &Value) -> Result<ArrayMeta> {
    if doc.get("zarr_format").and_then(Value::as_u64) != Some(2) {
        return Err(Error::unsupported("a .zarray whose zarr_format is not 2"));
    }
    let shape = dims(doc.get("shape").unwrap_or(&Value::Null), "shape")?;
    let chunks = dims(doc.get("chunks").unwrap_or(&Value::Null), "chunks")?;
    let dtype = match doc.get("dtype") {
        Some(Value::String(s)) => typestr(s)?,
        Some(other) => {
            return Err(Error::unsupported(format!(
                "dtype {other} (structured dtypes)"
            )))
        }
        None => return Err(Error::corrupt("no dtype")),
    };
    match text(doc, "order")? {
        "C" => {}
        "F" => return Err(Error::unsupported("order \"F\"")),
        o => return Err(Error::corrupt(format!("order {o:?}"))),
    }
    if let Some(f) = doc.get("filters").and_then(Value::as_array) {
        if let Some(first) = f.first() {
            let id = first.get("id").and_then(Value::as_str).unwrap_or("?");
            return Err(Error::unsupported(format!("filter {id:?}")));
        }
    }
    let sep = match doc.get("dimension_separator").and_then(Value::as_str) {
        None | Some(".") => b'.',
        Some("/") => b'/',
        Some(s) => return Err(Error::corrupt(format!("dimension_separator {s:?}"))),
    };
    let (codecs, codec_names) = compressor(doc.get("compressor").unwrap_or(&Value::Null))?;
    let fv = doc.get("fill_value").unwrap_or(&Value::Null);
    Ok(ArrayMeta {
        zarr_format: 2,
        fill: fill::bytes(fv, &dtype)?,
        fill_text: fv.to_string(),
        shape,
        chunks,
        dtype,
        keys: KeyEncoding { prefix: false, sep },
        swap: false,
        codecs,
        codec_names,
    })
}

/// A NumPy type string (`<i4`, `|b1`, `>f8`, ...).
fn typestr(s: &str) -> Result<DataType> {
    let b = s.as_bytes();
    let bad = || Error::unsupported(format!("dtype {s:?}"));
    let (&order, rest) = b.split_first().ok_or_else(bad)?;
    let (&kind, size) = rest.split_first().ok_or_else(bad)?;
    let size: u64 = std::str::from_utf8(size)
        .ok()
        .and_then(|n| n.parse().ok())
        .ok_or_else(bad)?;
    let ok_size = match kind {
        b'b' => size == 1,
        b'i' | b'u' => matches!(size, 1 | 2 | 4 | 8),
        b'f' => matches!(size, 2 | 4 | 8),
        b'c' => matches!(size, 8 | 16),
        _ => false,
    };
    if !ok_size || !matches!(order, b'<' | b'>' | b'|') || (order == b'|' && size != 1) {
        return Err(bad());
    }
    Ok(DataType {
        kind,
        size,
        big_endian: order == b'>',
    })
}

/// The v2 `compressor` as the pipeline's one codec.
fn compressor(c: &Value) -> Result<(Vec<Codec>, Vec<String>)> {
    if c.is_null() {
        return Ok((Vec::new(), Vec::new()));
    }
    let id = text(c, "id")?;
    let codec = match id {
        "blosc" => Codec::Blosc,
        "zstd" => Codec::Zstd,
        "gzip" => Codec::Gzip,
        "zlib" => Codec::Zlib,
        "lz4" => Codec::Lz4,
        other => return Err(Error::unsupported(format!("compressor {other:?}"))),
    };
    Ok((vec![codec], vec![c.to_string()]))
}
