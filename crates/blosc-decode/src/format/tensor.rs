//! The `__pack_tensor__` vlmetalayer that python-blosc2 (2.0 and later)
//! writes with `save_tensor`, `save_array` and `pack_tensor`: what the
//! frame's bytes are, an array in C order of a recorded shape and dtype.
//!
//! Its value is msgpack of the tuple `(kind, shape, dtype)`, each tuple
//! written as an array whose first item is the string `"__tuple__"`.
//! `kind` is `"numpy"`, `"torch"` or `"tensorflow"` (the bytes are laid out
//! the same: `numpy.asarray` of the tensor); `dtype` is `dtype.str`
//! (`'<f8'`), or for structured dtypes `dtype.descr`, a list of tuples.

use crate::format::bloscpack::NumpyMeta;
use crate::format::msgpack::{Reader, Val};
use crate::format::pylit::repr_str;

/// The vlmetalayer's name.
pub const VLMETA: &str = "__pack_tensor__";

/// What `__pack_tensor__` records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorMeta {
    /// Which library the tensor came from (`numpy`, `torch`, `tensorflow`).
    pub kind: String,
    /// The array's dtype (`.npy` descr), shape, always C order.
    pub numpy: NumpyMeta,
}

/// Read the `__pack_tensor__` value (its decoded bytes).
pub fn parse(value: &[u8]) -> Result<TensorMeta, String> {
    let v = Reader::new(value)
        .read()
        .map_err(|e| format!("{VLMETA}: {e}"))?;
    let items = tuple(&v).ok_or_else(|| format!("{VLMETA} is not a tuple"))?;
    let [kind, shape, dtype] = items else {
        return Err(format!("{VLMETA} holds {} items, not 3", items.len()));
    };
    let kind = kind
        .as_str()
        .ok_or_else(|| format!("{VLMETA}: kind is not text"))?;
    let shape = tuple(shape)
        .ok_or_else(|| format!("{VLMETA}: shape is not a tuple"))?
        .iter()
        .map(|d| d.as_int().and_then(|d| u64::try_from(d).ok()))
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| format!("{VLMETA}: shape holds a value that is not a size"))?;
    let descr = match dtype.as_str() {
        Some(s) => s.to_string(),
        None => pylit(dtype)?,
    };
    Ok(TensorMeta {
        kind: kind.to_string(),
        numpy: NumpyMeta {
            descr,
            shape,
            fortran_order: false,
        },
    })
}

/// The items of a msgpack-encoded Python tuple.
fn tuple<'v, 'a>(v: &'v Val<'a>) -> Option<&'v [Val<'a>]> {
    match v.as_array()? {
        [tag, rest @ ..] if tag.as_str() == Some("__tuple__") => Some(rest),
        _ => None,
    }
}

/// A msgpack value as a Python literal (text, integers, tuples and lists:
/// what a `dtype.descr` holds).
fn pylit(v: &Val) -> Result<String, String> {
    if let Some(s) = v.as_str() {
        return Ok(repr_str(s));
    }
    if let Some(i) = v.as_int() {
        return Ok(i.to_string());
    }
    let (items, open, close) = match tuple(v) {
        Some(t) => (t, "(", if t.len() == 1 { ",)" } else { ")" }),
        None => match v.as_array() {
            Some(a) => (a, "[", "]"),
            None => return Err(format!("{VLMETA}: dtype holds {v:?}")),
        },
    };
    let parts = items.iter().map(pylit).collect::<Result<Vec<_>, _>>()?;
    Ok(format!("{open}{}{close}", parts.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_python_blosc2_values() {
        // ('numpy', (40,), [('id', '<i4'), ('pos', '<f4', (3,)), ('tag', '|S3')])
        // as python-blosc2 2.0 to 4.14 write it.
        let v = b"\x94\xa9__tuple__\xa5numpy\x92\xa9__tuple__(\x93\x93\xa9__tuple__\xa2id\xa3<i4\x94\xa9__tuple__\xa3pos\xa3<f4\x92\xa9__tuple__\x03\x93\xa9__tuple__\xa3tag\xa3|S3";
        let m = parse(v).unwrap();
        assert_eq!(m.kind, "numpy");
        assert_eq!(m.numpy.shape, [40]);
        assert_eq!(
            m.numpy.descr,
            "[('id', '<i4'), ('pos', '<f4', (3,)), ('tag', '|S3')]"
        );
        // ('numpy', (), '|u1')
        let m = parse(b"\x94\xa9__tuple__\xa5numpy\x91\xa9__tuple__\xa3|u1").unwrap();
        assert_eq!((m.numpy.shape.len(), m.numpy.descr.as_str()), (0, "|u1"));
        for bad in [
            &b"\x93\xa5numpy\x90\xa3|u1"[..],
            b"\x94\xa9__tuple__\xa5numpy\x91\xa9__tuple__\xc0",
            b"\x92",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
