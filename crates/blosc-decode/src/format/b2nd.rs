//! The `b2nd` (formerly `caterva`) metalayer of an N-dimensional array:
//! msgpack `[version, ndim, shape[int64], chunkshape[int32],
//! blockshape[int32], dtype_format, dtype]`.

use crate::ensure;
use crate::error::{Error, Result};
use crate::format::msgpack::{Reader, Val};

/// What a `b2nd` metalayer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct B2nd {
    /// The metalayer's version.
    pub version: i64,
    /// The array's shape.
    pub shape: Vec<u64>,
    /// The shape of one chunk.
    pub chunkshape: Vec<u64>,
    /// The shape of one block.
    pub blockshape: Vec<u64>,
    /// 0 = NumPy dtype string.
    pub dtype_format: i64,
    /// NumPy `descr` (e.g. `<f8`, or a structured list); empty if absent.
    pub dtype: String,
}

fn dims(v: &Val, what: &str, ndim: usize) -> Result<Vec<u64>> {
    let a = v
        .as_array()
        .ok_or_else(|| Error::corrupt(format!("b2nd metalayer: {what} is not an array")))?;
    ensure!(
        a.len() == ndim,
        corrupt,
        "b2nd metalayer: {what} has {} entries for {ndim} dimensions",
        a.len()
    );
    a.iter()
        .map(|x| match x.as_int() {
            Some(i) if (0..=i64::MAX as i128).contains(&i) => Ok(i as u64),
            _ => Err(Error::corrupt(format!("b2nd metalayer: bad {what} entry"))),
        })
        .collect()
}

/// Parse a `b2nd` metalayer's msgpack bytes (every dimension checked).
pub fn parse(meta: &[u8]) -> Result<B2nd> {
    let v = Reader::new(meta).read()?;
    let a = v
        .as_array()
        .ok_or_else(|| Error::corrupt("b2nd metalayer is not an array"))?;
    ensure!(
        a.len() >= 5,
        corrupt,
        "b2nd metalayer has {} fields, too few",
        a.len()
    );
    let version = a[0].as_int().unwrap_or(0) as i64;
    let ndim = a[1]
        .as_int()
        .filter(|n| (0..=16).contains(n))
        .ok_or_else(|| Error::corrupt("b2nd metalayer: bad ndim"))? as usize;
    let shape = dims(&a[2], "shape", ndim)?;
    let chunkshape = dims(&a[3], "chunk shape", ndim)?;
    let blockshape = dims(&a[4], "block shape", ndim)?;
    let dtype_format = a.get(5).and_then(Val::as_int).unwrap_or(0) as i64;
    let dtype = a.get(6).and_then(Val::as_str).unwrap_or("").to_string();
    Ok(B2nd {
        version,
        shape,
        chunkshape,
        blockshape,
        dtype_format,
        dtype,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::frame::parse_header;

    const ARRAY: &[u8] = include_bytes!("../../../../tests/data/frame/b2nd-3d.b2nd");

    fn meta() -> Vec<u8> {
        let h = parse_header(ARRAY).unwrap();
        h.metalayers.into_iter().find(|m| m.0 == "b2nd").unwrap().1
    }

    #[test]
    fn parses_python_blosc2_metalayer() {
        let m = parse(&meta()).unwrap();
        assert_eq!(m.shape, [7, 11, 5]);
        assert_eq!(m.chunkshape, [4, 6, 3]);
        assert_eq!(m.blockshape, [2, 3, 2]);
        assert_eq!((m.dtype_format, m.dtype.as_str()), (0, "<i2"));
    }

    #[test]
    fn truncated_or_odd_metalayers_are_errors() {
        let m = meta();
        for n in 0..m.len() {
            // Only the trailing optional dtype fields may be cut without error.
            if let Ok(b) = parse(&m[..n]) {
                assert_eq!(b.shape, [7, 11, 5]);
            }
        }
        assert!(parse(&[0x97, 0, 17, 0x90, 0x90, 0x90, 0, 0xa0]).is_err()); // ndim 17
        assert!(parse(&[0x95, 0, 1, 0x91, 0xff, 0x91, 1, 0x91, 1]).is_err()); // shape -1
        assert!(parse(&[0x95, 0, 2, 0x91, 1, 0x91, 1, 0x91, 1]).is_err()); // ndim 2, 1 dim
        assert!(parse(&[0xc0]).is_err());
    }
}
