//! Fill values: one element's bytes from the metadata's JSON (a number,
//! `null`, a boolean, `"NaN"`, `"Infinity"`, `"-Infinity"`, v3's `"0x..."`
//! bit patterns, `[re, im]` for complex numbers, base64 text for bytes and
//! structured types, text for unicode).

use super::DataType;
use crate::{Error, Result};
use serde_json::Value;

/// One element of value `v` in `dt`'s presented byte order.
pub(super) fn bytes(v: &Value, dt: &DataType) -> Result<Vec<u8>> {
    let bad = || Error::unsupported(format!("fill value {v} for {}", dt.typestr()));
    let le: Vec<u8> = match (dt.kind, v) {
        (_, Value::Null) => vec![0; dt.size as usize],
        (b'b', Value::Bool(b)) => vec![*b as u8],
        (b'b', Value::Number(n)) if n.as_u64().is_some_and(|x| x <= 1) => {
            vec![n.as_u64().unwrap_or(0) as u8]
        }
        (b'i' | b'u' | b'M' | b'm', Value::Number(_)) => int(v, dt).ok_or_else(bad)?,
        (b'S' | b'V', Value::String(s)) => {
            padded(base64(s).ok_or_else(bad)?, dt).ok_or_else(bad)?
        }
        (b'U', Value::String(s)) => {
            let utf32 = s.chars().flat_map(|c| u32::from(c).to_le_bytes()).collect();
            padded(utf32, dt).ok_or_else(bad)?
        }
        (b'f', _) => float(v, dt.size).ok_or_else(bad)?,
        (b'c', Value::Array(pair)) if pair.len() == 2 => {
            let mut out = float(&pair[0], dt.size / 2).ok_or_else(bad)?;
            out.extend(float(&pair[1], dt.size / 2).ok_or_else(bad)?);
            out
        }
        _ => return Err(bad()),
    };
    Ok(if dt.big_endian {
        swapped(&le, dt.swap_unit() as usize)
    } else {
        le
    })
}

/// Standard base64 text's bytes.
fn base64(s: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

/// `b` padded with zeros to one element of `dt`, unless longer.
fn padded(mut b: Vec<u8>, dt: &DataType) -> Option<Vec<u8>> {
    (b.len() as u64 <= dt.size).then(|| {
        b.resize(dt.size as usize, 0);
        b
    })
}

/// `b` with each `unit` bytes reversed.
pub(crate) fn swapped(b: &[u8], unit: usize) -> Vec<u8> {
    b.chunks(unit.max(1))
        .flat_map(|c| c.iter().rev().copied())
        .collect()
}

/// An integer fill value, little-endian, if it is in the type's range.
fn int(v: &Value, dt: &DataType) -> Option<Vec<u8>> {
    let bits = dt.size * 8;
    let x: i128 = match (v.as_i64(), v.as_u64(), v.as_f64()) {
        (Some(i), _, _) => i as i128,
        (_, Some(u), _) => u as i128,
        (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 1e19 => f as i128,
        _ => return None,
    };
    let (lo, hi) = if dt.kind == b'u' {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    };
    (lo..=hi)
        .contains(&x)
        .then(|| x.to_le_bytes()[..dt.size as usize].to_vec())
}

/// A float fill value of `size` bytes, little-endian.
fn float(v: &Value, size: u64) -> Option<Vec<u8>> {
    let x = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => match s.as_str() {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            hex => return bit_pattern(hex, size),
        },
        _ => return None,
    };
    Some(match size {
        2 => f16_bits(x).to_le_bytes().to_vec(),
        4 => (x as f32).to_le_bytes().to_vec(),
        8 => x.to_le_bytes().to_vec(),
        _ => return None,
    })
}

/// v3's `"0x7fc00000"`: the value's bits, most significant first.
fn bit_pattern(s: &str, size: u64) -> Option<Vec<u8>> {
    let h = s.strip_prefix("0x")?;
    if h.len() as u64 != size * 2 {
        return None;
    }
    let bits = u64::from_str_radix(h, 16).ok()?;
    Some(bits.to_le_bytes()[..size as usize].to_vec())
}

/// `x` as IEEE half precision bits, rounded to nearest even from `x`
/// itself, as NumPy rounds a float64 (through float32 it could round
/// twice). A NaN keeps its sign and the top of its payload, as in NumPy.
pub(crate) fn f16_bits(x: f64) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 48) & 0x8000) as u16;
    let exp = ((b >> 52) & 0x7ff) as i32;
    let man = b & ((1 << 52) - 1);
    if exp == 0x7ff {
        let nan = 0x7c00 | (man >> 42) as u16;
        return sign
            | if man != 0 && nan == 0x7c00 {
                0x7c01
            } else {
                nan
            };
    }
    let e = exp - 1023 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e < -10 {
        return sign;
    }
    // Units of the result's last place: 2^-24 below the normal range.
    let (m, shift, high) = if e <= 0 {
        (man | 1 << 52, (43 - e) as u32, 0)
    } else {
        (man, 42, (e as u64) << 10)
    };
    let mut r = high | m >> shift;
    let rest = m & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    if rest > half || (rest == half && r & 1 == 1) {
        r += 1;
    }
    sign | r as u16
}

#[cfg(test)]
mod tests {
    #[test]
    fn half_precision() {
        for (x, bits) in [
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (65504.0, 0x7bff),
            (1e6, 0x7c00),
        ] {
            assert_eq!(super::f16_bits(x), bits, "{x}");
        }
        assert_eq!(super::f16_bits(5.960464477539063e-8), 1);
        assert_eq!(super::f16_bits(f64::NAN), 0x7e00);
        assert_eq!(super::f16_bits(-f64::NAN), 0xfe00);
        assert_eq!(super::f16_bits(2f64.powi(-25)), 0);
        assert_eq!(super::f16_bits(-2f64.powi(-25) * 1.5), 0x8001);
        assert_eq!(super::f16_bits(2f64.powi(-14)), 0x0400);
        assert_eq!(super::f16_bits(65520.0), 0x7c00);
    }

    /// Rounded once, from the float64: through float32 this value rounds
    /// to the tie between 1 and the next half, then down to 1 (NumPy:
    /// `np.array([1 + 2**-11 + 2**-40]).astype("f2")` is 0x3c01).
    #[test]
    fn half_precision_rounds_once() {
        assert_eq!(
            super::f16_bits(1.0 + 2f64.powi(-11) + 2f64.powi(-40)),
            0x3c01
        );
        assert_eq!(super::f16_bits(2f64.powi(-25) + 2f64.powi(-60)), 1);
    }
}
