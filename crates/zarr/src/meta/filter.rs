//! Array-to-array steps before the bytes codecs: v2 `filters` and
//! `order: "F"`, v3's `transpose` and numcodecs' array codecs
//! (`numcodecs.delta` ...), each with the element types it maps between.

use super::dtype::{self, DataType};
use crate::{Error, Result};
use serde_json::Value;

/// One step, as applied when a chunk was written.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// The chunk of C-order shape `shape` stored as its transpose by
    /// `order` (`stored.shape[i] == shape[order[i]]`).
    Transpose { order: Vec<usize>, shape: Vec<u64> },
    /// numcodecs Delta: differences of `dtype` values, stored as `astype`.
    Delta { dtype: DataType, astype: DataType },
    /// numcodecs FixedScaleOffset: `(x - offset) * scale` stored as
    /// `astype`.
    Scale {
        offset: f64,
        scale: f64,
        dtype: DataType,
        astype: DataType,
    },
    /// numcodecs AsType and Quantize (lossy; decoded by the cast alone):
    /// `dec` values stored as `enc`.
    AsType { enc: DataType, dec: DataType },
    /// numcodecs Shuffle: the bytes of each `n`-byte element grouped.
    Shuffle(u64),
    /// numcodecs BitRound: decoding leaves the values as they are.
    Identity,
}

impl Filter {
    /// The element type a chunk holds after this step, given the one it
    /// was given (`cur`): an error unless the step takes `cur`.
    pub fn encoded(&self, cur: &DataType) -> Result<DataType> {
        let takes = |d: &DataType, what: &str| {
            if d.same(cur) && d.is_numeric() {
                Ok(())
            } else {
                Err(Error::unsupported(format!(
                    "{what} of {} on values of {}",
                    d.typestr(),
                    cur.typestr()
                )))
            }
        };
        match self {
            Filter::Transpose { .. } | Filter::Shuffle(_) => Ok(cur.clone()),
            Filter::Identity if cur.kind == b'f' => Ok(cur.clone()),
            Filter::Identity => Err(Error::unsupported("bitround of non-float values")),
            Filter::Delta { dtype, astype } => {
                takes(dtype, "delta")?;
                let floats = dtype.kind == b'f' || astype.kind == b'f';
                if floats && !astype.same(dtype) {
                    return Err(Error::unsupported("delta across float types"));
                }
                Ok(astype.clone())
            }
            Filter::Scale { dtype, astype, .. } => {
                takes(dtype, "fixedscaleoffset")?;
                Ok(astype.clone())
            }
            Filter::AsType { enc, dec } => {
                takes(dec, "astype")?;
                Ok(enc.clone())
            }
        }
    }
}

/// A numcodecs filter by its id (v2's `id`, v3's name after `numcodecs.`)
/// and configuration.
pub fn numcodecs(id: &str, c: &Value) -> Result<Filter> {
    let ty = |k: &str| match c.get(k).and_then(Value::as_str) {
        Some(s) => dtype::numpy(s),
        None => Err(Error::corrupt(format!("{id}: no {k}"))),
    };
    let num = |k: &str| {
        c.get(k)
            .and_then(Value::as_f64)
            .ok_or_else(|| Error::corrupt(format!("{id}: no number {k}")))
    };
    let numeric = |d: DataType| {
        if d.is_numeric() {
            Ok(d)
        } else {
            Err(Error::unsupported(format!("{id} to {}", d.typestr())))
        }
    };
    let dtype_or = |k: &str, d: &DataType| match c.get(k) {
        None | Some(Value::Null) => Ok(d.clone()),
        _ => ty(k).and_then(numeric),
    };
    Ok(match id {
        "delta" => {
            let dtype = ty("dtype")?;
            let astype = dtype_or("astype", &dtype)?;
            Filter::Delta { dtype, astype }
        }
        "fixedscaleoffset" => {
            let dtype = ty("dtype")?;
            let astype = dtype_or("astype", &dtype)?;
            Filter::Scale {
                offset: num("offset")?,
                scale: num("scale")?,
                dtype,
                astype,
            }
        }
        "astype" => Filter::AsType {
            enc: ty("encode_dtype").and_then(numeric)?,
            dec: ty("decode_dtype")?,
        },
        "quantize" => {
            let dec = ty("dtype")?;
            let enc = dtype_or("astype", &dec)?;
            Filter::AsType { enc, dec }
        }
        "bitround" => Filter::Identity,
        "shuffle" => Filter::Shuffle(
            c.get("elementsize")
                .and_then(Value::as_u64)
                .filter(|&n| n <= 1 << 16)
                .ok_or_else(|| Error::corrupt("shuffle: no elementsize"))?,
        ),
        other => return Err(Error::unsupported(format!("filter {other:?}"))),
    })
}

/// v3's `transpose` of a chunk of `shape`: the permutation and the
/// shape after it.
pub fn transpose(c: &Value, shape: &[u64]) -> Result<(Filter, Vec<u64>)> {
    let order: Vec<usize> = super::dims(&c["order"], "transpose order")?
        .into_iter()
        .map(|d| d as usize)
        .collect();
    let mut seen = vec![false; shape.len()];
    for &o in &order {
        match seen.get_mut(o) {
            Some(s) if !*s => *s = true,
            _ => return Err(Error::corrupt(format!("transpose order {order:?}"))),
        }
    }
    if order.len() != shape.len() {
        return Err(Error::corrupt(format!("transpose order {order:?}")));
    }
    let after = order.iter().map(|&o| shape[o]).collect();
    let f = Filter::Transpose {
        order,
        shape: shape.to_vec(),
    };
    Ok((f, after))
}

/// v2's `order: "F"`: a chunk of `shape` stored in Fortran order, that is
/// as its transpose by the reversed axes.
pub fn fortran(shape: &[u64]) -> Filter {
    Filter::Transpose {
        order: (0..shape.len()).rev().collect(),
        shape: shape.to_vec(),
    }
}
