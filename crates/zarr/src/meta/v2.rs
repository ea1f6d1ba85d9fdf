//! Zarr v2 `.zarray`.

use super::{dims, dtype, fill, filter, text, ArrayMeta, Codec, KeyEncoding};
use crate::{Error, Result};
use serde_json::Value;

pub(super) fn parse(doc: &Value) -> Result<ArrayMeta> {
    if doc.get("zarr_format").and_then(Value::as_u64) != Some(2) {
        return Err(Error::unsupported("a .zarray whose zarr_format is not 2"));
    }
    let shape = dims(doc.get("shape").unwrap_or(&Value::Null), "shape")?;
    let chunks = dims(doc.get("chunks").unwrap_or(&Value::Null), "chunks")?;
    let dtype = dtype::v2(doc.get("dtype").ok_or_else(|| Error::corrupt("no dtype"))?)
        .map_err(|e| with_filter_ids(e, doc))?;
    let mut names = Vec::new();
    let mut filters = match text(doc, "order")? {
        "C" => Vec::new(),
        "F" => {
            names.push("order \"F\" (presented in C order)".to_string());
            vec![filter::fortran(&chunks)]
        }
        o => return Err(Error::corrupt(format!("order {o:?}"))),
    };
    if let Some(list) = doc.get("filters").filter(|f| !f.is_null()) {
        for f in list
            .as_array()
            .ok_or_else(|| Error::corrupt("filters is not a list"))?
        {
            filters.push(filter::numcodecs(text(f, "id")?, f)?);
            names.push(f.to_string());
        }
    }
    let stored = ArrayMeta::stored_type(&dtype, &filters)?;
    let sep = match doc.get("dimension_separator").and_then(Value::as_str) {
        None | Some(".") => b'.',
        Some("/") => b'/',
        Some(s) => return Err(Error::corrupt(format!("dimension_separator {s:?}"))),
    };
    let (codecs, more) = compressor(doc.get("compressor").unwrap_or(&Value::Null))?;
    names.extend(more);
    let fv = doc.get("fill_value").unwrap_or(&Value::Null);
    Ok(ArrayMeta {
        zarr_format: 2,
        fill: fill::bytes(fv, &dtype)?,
        fill_text: fv.to_string(),
        shape,
        chunks,
        dtype,
        keys: KeyEncoding { prefix: false, sep },
        filters,
        stored,
        swap: false,
        codecs,
        codec_names: names,
        shard: None,
    })
}

/// `e` naming the filters of `doc` (an object dtype's codec, such as
/// `vlen-utf8`, is among them).
fn with_filter_ids(mut e: Error, doc: &Value) -> Error {
    let ids: Vec<&str> = doc
        .get("filters")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(|f| f.get("id")?.as_str()).collect())
        .unwrap_or_default();
    if !ids.is_empty() {
        e.reason = format!("{} (filters {})", e.reason, ids.join(", "));
    }
    e
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
