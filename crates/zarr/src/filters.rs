//! The array-to-array steps undone, as numcodecs and zarr-python undo
//! them: numbers cast as NumPy's `astype` casts (integers wrap, floats
//! round to nearest, floats to integers truncate), a transposed chunk
//! put back in C order.

use crate::meta::fill::f16_bits;
use crate::meta::{DataType, Filter};
use crate::{Error, Result};

/// One element's value.
#[derive(Debug, Clone, Copy)]
enum Num {
    I(i128),
    F(f64),
}

/// `data` (elements of `f`'s encoded type) decoded to elements of `cur`,
/// the type `f` was given when the chunk was written.
pub(crate) fn undo(f: &Filter, data: Vec<u8>, cur: &DataType) -> Result<Vec<u8>> {
    match f {
        Filter::Identity => Ok(data),
        Filter::Shuffle(n) => unshuffle(data, *n),
        Filter::Transpose { order, shape } => untranspose(&data, order, shape, cur.size),
        Filter::AsType { enc, dec } => map(&data, enc, dec, |x| x),
        Filter::Scale {
            offset,
            scale,
            dtype,
            astype,
        } => {
            // NumPy computes in the encoded float type (NEP 50: the
            // scalars take the array's type), else in float64.
            let width = if astype.kind == b'f' { astype.size } else { 8 };
            map(&data, astype, dtype, |x| {
                let x = as_f64(x);
                Num::F(match width {
                    2 => {
                        let q = round16(x as f32 / round16(*scale as f32) as f32);
                        round16(q as f32 + round16(*offset as f32) as f32)
                    }
                    4 => ((x as f32) / (*scale as f32) + (*offset as f32)) as f64,
                    _ => x / scale + offset,
                })
            })
        }
        Filter::Delta { dtype, astype } => {
            // A running sum in the array's type (floats round at every
            // step, float16 through float32 as NumPy adds halves).
            let width = if dtype.kind == b'f' { dtype.size } else { 8 };
            let mut acc = Num::I(0);
            map(&data, astype, dtype, |x| {
                acc = match (acc, x) {
                    (Num::I(a), Num::I(b)) => Num::I(wrap64(a.wrapping_add(b))),
                    (a, b) if width == 2 => Num::F(round16(as_f64(a) as f32 + as_f64(b) as f32)),
                    (a, b) if width == 4 => Num::F((as_f64(a) as f32 + as_f64(b) as f32) as f64),
                    (a, b) => Num::F(as_f64(a) + as_f64(b)),
                };
                acc
            })
        }
    }
}

/// `x` rounded to half precision, as NumPy stores the result of an
/// operation on halves (computed in float32).
fn round16(x: f32) -> f64 {
    half(f16_bits(x as f64))
}

/// `a` reduced to 64 bits (the widest integer type), sign kept.
fn wrap64(a: i128) -> i128 {
    a as i64 as i128
}

fn as_f64(x: Num) -> f64 {
    match x {
        Num::I(i) => i as f64,
        Num::F(f) => f,
    }
}

/// Each element of `data` (of type `from`) through `f`, cast to `to`.
fn map(
    data: &[u8],
    from: &DataType,
    to: &DataType,
    mut f: impl FnMut(Num) -> Num,
) -> Result<Vec<u8>> {
    let (fs, ts) = (from.size as usize, to.size as usize);
    if !data.len().is_multiple_of(fs) {
        return Err(Error::corrupt(format!(
            "{} bytes are not elements of {}",
            data.len(),
            from.typestr()
        )));
    }
    let mut out = vec![0u8; data.len() / fs * ts];
    for (src, dst) in data.chunks_exact(fs).zip(out.chunks_exact_mut(ts)) {
        put(to, f(get(from, src)), dst);
    }
    Ok(out)
}

/// The value of the element `b` of type `dt` (a number type).
fn get(dt: &DataType, b: &[u8]) -> Num {
    let mut le = [0u8; 16];
    for (i, &x) in b.iter().enumerate() {
        le[if dt.big_endian { b.len() - 1 - i } else { i }] = x;
    }
    let bits = u128::from_le_bytes(le);
    let n = b.len() as u32 * 8;
    match dt.kind {
        b'f' => Num::F(match n {
            16 => half(bits as u16),
            32 => f32::from_bits(bits as u32) as f64,
            _ => f64::from_bits(bits as u64),
        }),
        b'i' => Num::I(((bits << (128 - n)) as i128) >> (128 - n)),
        _ => Num::I(bits as i128),
    }
}

/// `x` written into `out` as one element of type `dt` (a number type).
fn put(dt: &DataType, x: Num, out: &mut [u8]) {
    let le: [u8; 16] = match (dt.kind, x) {
        (b'f', x) => {
            let v = as_f64(x);
            let mut le = [0u8; 16];
            match dt.size {
                2 => le[..2].copy_from_slice(&f16_bits(v).to_le_bytes()),
                4 => le[..4].copy_from_slice(&(v as f32).to_le_bytes()),
                _ => le[..8].copy_from_slice(&v.to_le_bytes()),
            }
            le
        }
        (_, Num::I(i)) => i.to_le_bytes(),
        // NumPy truncates toward zero.
        (_, Num::F(f)) => (f as i128).to_le_bytes(),
    };
    let n = out.len();
    for (i, o) in out.iter_mut().enumerate() {
        *o = le[if dt.big_endian { n - 1 - i } else { i }];
    }
}

/// An IEEE half-precision value, exactly (a NaN keeps its sign and
/// payload, as NumPy widens it).
fn half(h: u16) -> f64 {
    let sign = ((h & 0x8000) as u64) << 48;
    let man = (h & 0x3ff) as u64;
    match (h >> 10) & 0x1f {
        0x1f => f64::from_bits(sign | 0x7ff0_0000_0000_0000 | man << 42),
        0 => f64::from_bits(sign | (man as f64 * 2f64.powi(-24)).to_bits()),
        e => f64::from_bits(sign | (e as u64 + 1023 - 15) << 52 | man << 42),
    }
}

/// numcodecs' Shuffle undone: byte `j` of element `i` is at
/// `j * count + i`.
pub(crate) fn unshuffle(data: Vec<u8>, n: u64) -> Result<Vec<u8>> {
    let n = n as usize;
    if n <= 1 {
        return Ok(data);
    }
    if !data.len().is_multiple_of(n) {
        return Err(Error::corrupt(format!(
            "shuffle: {} bytes are not elements of {n}",
            data.len()
        )));
    }
    let count = data.len() / n;
    let mut out = vec![0u8; data.len()];
    for (i, dst) in out.chunks_exact_mut(n).enumerate() {
        for (j, d) in dst.iter_mut().enumerate() {
            *d = data[j * count + i];
        }
    }
    Ok(out)
}

/// The chunk of C-order `shape` back from its transpose by `order`
/// (elements of `size` bytes).
fn untranspose(data: &[u8], order: &[usize], shape: &[u64], size: u64) -> Result<Vec<u8>> {
    let s = size as usize;
    let count: u64 = shape.iter().product();
    if data.len() as u64 != count * size {
        return Err(Error::corrupt(format!(
            "transposed chunk of {} bytes, expected {}",
            data.len(),
            count * size
        )));
    }
    // The stored layout's strides (in elements), then each output
    // dimension's stride in it.
    let nd = shape.len();
    let mut stored = vec![0u64; nd];
    let mut acc = 1u64;
    for i in (0..nd).rev() {
        stored[i] = acc;
        acc *= shape[order[i]];
    }
    let mut stride = vec![0u64; nd];
    for (i, &o) in order.iter().enumerate() {
        stride[o] = stored[i];
    }
    let mut out = Vec::with_capacity(data.len());
    let mut idx = vec![0u64; nd];
    for _ in 0..count {
        let at = idx.iter().zip(&stride).map(|(i, st)| i * st).sum::<u64>() as usize * s;
        out.extend_from_slice(&data[at..at + s]);
        for d in (0..nd).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_and_shuffle_undone() {
        // A 2x3 chunk stored as its 3x2 transpose.
        let stored = [0u8, 3, 1, 4, 2, 5];
        assert_eq!(
            untranspose(&stored, &[1, 0], &[2, 3], 1).unwrap(),
            [0, 1, 2, 3, 4, 5]
        );
        assert_eq!(unshuffle(vec![1, 3, 2, 4], 2).unwrap(), [1, 2, 3, 4]);
        assert!(unshuffle(vec![1, 2, 3], 2).is_err());
        assert_eq!(half(0x3c00), 1.0);
        assert_eq!(half(0xc000), -2.0);
        assert_eq!(half(0x0001), 2f64.powi(-24));
        assert_eq!(half(0x8000).to_bits(), (-0.0f64).to_bits());
        assert_eq!(half(0x7bff), 65504.0);
        for h in [0x7c00u16, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x3555, 0x83ff] {
            assert_eq!(f16_bits(half(h)), h, "{h:#x}");
        }
    }
}
