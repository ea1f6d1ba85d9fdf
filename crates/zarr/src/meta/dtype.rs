//! Element types: v2's NumPy type strings and structured lists, v3's data
//! type names, both read through blosc-decode's [`Dtype`] (which also
//! writes the `.npy` header's `descr`).

use crate::{Error, Result};
use blosc_decode::dtype::Dtype;
use blosc_decode::format::pylit::repr_str;
use serde_json::Value;

/// Largest element accepted, in bytes.
pub const MAX_ITEM_BYTES: u64 = 1 << 20;

/// An element type: NumPy kind (`b`, `i`, `u`, `f`, `c`, `M`, `m`, `S`,
/// `U`, `V` for structured and raw types), size and `.npy` descr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataType {
    pub kind: u8,
    pub size: u64,
    /// The byte order of the values presented (the one NumPy shows).
    pub big_endian: bool,
    /// The `descr` of the `.npy` header: `'<i4'`, `[('a', '<i4')]`.
    pub descr: String,
}

impl DataType {
    /// NumPy's type string (`<i4`, `|S5`, `<M8[ns]`), or for a structured
    /// type its `descr`.
    pub fn typestr(&self) -> &str {
        self.descr.trim_matches('\'')
    }

    /// The size of one byte-order unit: a complex number's halves and a
    /// unicode string's characters are swapped separately; 1 for types
    /// without a byte order.
    pub fn swap_unit(&self) -> u64 {
        match self.kind {
            b'c' => self.size / 2,
            b'U' => 4,
            b'S' | b'V' | b'b' => 1,
            _ => self.size,
        }
    }

    /// A number NumPy casts (integers, floats).
    pub fn is_numeric(&self) -> bool {
        matches!(self.kind, b'i' | b'u' | b'f')
    }

    /// The same type as `other`, byte order included.
    pub fn same(&self, other: &DataType) -> bool {
        self.descr == other.descr
    }
}

/// The type NumPy reads `text` as (a type string, or a structured list in
/// Python's literal form).
pub fn numpy(text: &str) -> Result<DataType> {
    let code = text
        .trim_matches('\'')
        .trim_start_matches(['<', '>', '|', '=']);
    if code.starts_with('O') {
        return Err(Error::unsupported(
            "object dtype (variable-length strings or Python objects)",
        ));
    }
    let d = Dtype::parse(text).map_err(|e| Error::unsupported(format!("dtype: {e}")))?;
    let descr = d
        .descr()
        .map_err(|e| Error::unsupported(format!("dtype {text:?}: {e}")))?;
    let (kind, big_endian) = match &d {
        Dtype::Scalar { code, .. } => {
            let b = code.as_bytes();
            (b.get(1).copied().unwrap_or(0), b.first() == Some(&b'>'))
        }
        _ => (b'V', false),
    };
    let size = d.itemsize();
    if size > MAX_ITEM_BYTES {
        return Err(Error::unsupported(format!(
            "dtype {text:?}: elements of {size} bytes (at most {MAX_ITEM_BYTES})"
        )));
    }
    let ok = match kind {
        b'b' | b'S' | b'U' | b'V' | b'M' | b'm' => size > 0,
        b'i' | b'u' => matches!(size, 1 | 2 | 4 | 8),
        b'f' => matches!(size, 2 | 4 | 8),
        b'c' => matches!(size, 8 | 16),
        _ => false,
    };
    if !ok {
        return Err(Error::unsupported(format!("dtype {text:?}")));
    }
    Ok(DataType {
        kind,
        size,
        big_endian,
        descr,
    })
}

/// A v2 `dtype`: a type string, or a structured type's list of
/// `[name, type]` and `[name, type, shape]`.
pub fn v2(v: &Value) -> Result<DataType> {
    numpy(&v2_text(v, 0)?)
}

/// Nested structured types, at most this deep.
const MAX_DEPTH: usize = 8;

fn v2_text(v: &Value, depth: usize) -> Result<String> {
    let bad = || Error::corrupt(format!("dtype {v}"));
    match v {
        Value::String(s) => Ok(repr_str(s)),
        Value::Array(fields) if depth < MAX_DEPTH => {
            let mut out = Vec::with_capacity(fields.len());
            for f in fields {
                let f = f.as_array().ok_or_else(bad)?;
                let (name, ty) = match (f.first(), f.get(1)) {
                    (Some(Value::String(n)), Some(t)) => (n, v2_text(t, depth + 1)?),
                    _ => return Err(bad()),
                };
                out.push(match f.get(2) {
                    None => format!("({}, {ty})", repr_str(name)),
                    Some(shape) => format!("({}, {ty}, {})", repr_str(name), tuple(shape)?),
                });
            }
            Ok(format!("[{}]", out.join(", ")))
        }
        _ => Err(bad()),
    }
}

/// A JSON list of dimensions as a Python tuple.
fn tuple(v: &Value) -> Result<String> {
    let d = super::dims(v, "field shape")?;
    let parts: Vec<String> = d.iter().map(u64::to_string).collect();
    Ok(match parts.len() {
        1 => format!("({},)", parts[0]),
        _ => format!("({})", parts.join(", ")),
    })
}

/// A v3 `data_type`: a core type's name, or a named type with its
/// configuration (`numpy.datetime64`, `numpy.timedelta64`,
/// `null_terminated_bytes`, `fixed_length_utf32`, `structured`).
pub fn v3(v: &Value) -> Result<DataType> {
    numpy(&v3_text(v)?)
}

fn v3_text(v: &Value) -> Result<String> {
    if let Some(name) = v.as_str() {
        return v3_core(name).map(repr_str);
    }
    let name = super::text(v, "name")?;
    let c = &v["configuration"];
    let num = |k: &str| {
        c[k].as_u64()
            .ok_or_else(|| Error::corrupt(format!("data type {name}: no {k}")))
    };
    Ok(match name {
        "numpy.datetime64" | "numpy.timedelta64" => {
            let unit = super::text(c, "unit")?;
            let kind = if name.ends_with("datetime64") {
                'M'
            } else {
                'm'
            };
            let scale = match num("scale_factor")? {
                1 => String::new(),
                n => n.to_string(),
            };
            repr_str(&format!("<{kind}8[{scale}{unit}]"))
        }
        "null_terminated_bytes" => repr_str(&format!("|S{}", num("length_bytes")?)),
        "fixed_length_utf32" => {
            let n = num("length_bytes")?;
            if !n.is_multiple_of(4) {
                return Err(Error::corrupt(format!("fixed_length_utf32 of {n} bytes")));
            }
            repr_str(&format!("<U{}", n / 4))
        }
        "structured" => {
            let fields = c["fields"]
                .as_array()
                .ok_or_else(|| Error::corrupt("structured data type without fields"))?;
            let mut out = Vec::with_capacity(fields.len());
            for f in fields {
                match (f.get(0).and_then(Value::as_str), f.get(1)) {
                    (Some(n), Some(t)) => out.push(format!("({}, {})", repr_str(n), v3_text(t)?)),
                    _ => return Err(Error::corrupt(format!("structured field {f}"))),
                }
            }
            format!("[{}]", out.join(", "))
        }
        other => return Err(Error::unsupported(format!("data type {other:?}"))),
    })
}

/// The NumPy type string of a v3 core data type.
fn v3_core(name: &str) -> Result<&'static str> {
    Ok(match name {
        "bool" => "|b1",
        "int8" => "|i1",
        "int16" => "<i2",
        "int32" => "<i4",
        "int64" => "<i8",
        "uint8" => "|u1",
        "uint16" => "<u2",
        "uint32" => "<u4",
        "uint64" => "<u8",
        "float16" => "<f2",
        "float32" => "<f4",
        "float64" => "<f8",
        "complex64" => "<c8",
        "complex128" => "<c16",
        "string" => {
            return Err(Error::unsupported(
                "variable-length strings (data type \"string\")",
            ))
        }
        "bytes" => {
            return Err(Error::unsupported(
                "variable-length bytes (data type \"bytes\")",
            ))
        }
        other => return Err(Error::unsupported(format!("data type {other:?}"))),
    })
}
