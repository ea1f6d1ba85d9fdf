//! The ZFP plugin codecs of C-Blosc2 (ids 33 `zfp_acc`, 34 `zfp_prec`,
//! 35 `zfp_rate`), decoded with `zfp-rs`.
//!
//! C-Blosc2's plugin (`plugins/codecs/zfp/blosc2-zfp.c`) compresses each
//! block as one ZFP field, without a ZFP header: the field's dimensions are
//! the array's block shape from the `b2nd` metalayer (last axis fastest, so
//! ZFP's `nx` is the last one), its scalar type is `f32` for a typesize of 4
//! and `f64` for 8, and the mode comes from the chunk's codec meta byte:
//!
//! - accuracy: tolerance `10^(meta as i8)`;
//! - precision: `meta + 5, 7, 9, 11` bits for 1 to 4 dimensions (at most 64);
//! - rate: `meta / 100 * typesize * 8` bits a value, not word-aligned.
//!
//! So decoding a block needs the block shape, which the chunk does not hold:
//! it comes in `Params` (the container sets it from its metalayer).

use super::Params;
use crate::ensure;
use crate::error::{Error, Result};
use zfp_rs::{
    ZfpBitStreamRef, ZfpConfig, ZfpDimensionality, ZfpFieldMut, ZfpScalar, ZfpScalarType,
    ZfpStreamAlignment,
};

/// Which of the three ZFP codecs (the codec id less 33).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Fixed accuracy (`zfp_acc`, codec id 33).
    Accuracy,
    /// Fixed precision (`zfp_prec`, codec id 34).
    Precision,
    /// Fixed rate (`zfp_rate`, codec id 35).
    Rate,
}

impl Mode {
    /// The codec's name as C-Blosc2 spells it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Accuracy => "zfp_acc",
            Mode::Precision => "zfp_prec",
            Mode::Rate => "zfp_rate",
        }
    }
}

/// The most dimensions a ZFP field has.
const MAX_DIMS: usize = 4;

/// Decode the ZFP stream `src` into all of `dst` (one whole block).
pub fn decompress(mode: Mode, src: &[u8], dst: &mut [u8], p: &Params) -> Result<usize> {
    let name = mode.name();
    let shape = p.block_shape.ok_or_else(|| {
        Error::unsupported(format!(
            "{name} stream: the codec needs the array's block shape (a b2nd metalayer), and there is none"
        ))
    })?;
    let ndim = shape.len();
    ensure!(
        (1..=MAX_DIMS).contains(&ndim),
        unsupported,
        "{name} stream: ZFP blocks have 1 to 4 dimensions, this array has {ndim}"
    );
    let ts = p.typesize as usize;
    let ty = match ts {
        4 => ZfpScalarType::F32,
        8 => ZfpScalarType::F64,
        _ => {
            return Err(Error::unsupported(format!(
                "{name} stream: ZFP codes 4- or 8-byte floats, not items of {ts} bytes"
            )))
        }
    };
    // The field covers the stream's output exactly: checked in u64, so no
    // block shape from a metalayer can overflow it.
    let field = shape
        .iter()
        .try_fold(ts as u64, |a, &d| a.checked_mul(d))
        .filter(|_| shape.iter().all(|&d| d > 0));
    let out = dst.len() as u64;
    ensure!(
        field != Some(out * ts as u64),
        unsupported,
        "{name} stream of a block split into {ts} streams: ZFP codes whole blocks (python-blosc2 2.x to 4.0 wrote these; 4.14 refuses them, and older releases overrun their buffers reading them)"
    );
    ensure!(
        field == Some(out),
        corrupt,
        "{name} stream: block shape {shape:?} of {ts}-byte items does not fill the stream's {out} bytes"
    );
    // ZFP's `nx` is the fastest-varying axis: the block's last.
    let mut dims = [0usize; MAX_DIMS];
    for (k, &d) in shape.iter().rev().enumerate() {
        dims[k] = d as usize;
    }
    let config = config(mode, p.meta, ty, ndim)?;
    // zfp-rs reads 64-bit words; the stream sits anywhere in the chunk. A
    // last partial word is zero-padded.
    let words: Vec<u64> = src
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();
    let mut bs = ZfpBitStreamRef::from_words(&words);
    match ty {
        ZfpScalarType::F32 => decode_into::<f32>(&mut bs, &config, dims, dst),
        _ => decode_into::<f64>(&mut bs, &config, dims, dst),
    }
    .map_err(|e| Error::corrupt(format!("{name} stream: {e}")))?;
    Ok(dst.len())
}

/// The stream parameters C-Blosc2 set for `mode` and its meta byte.
fn config(mode: Mode, meta: u8, ty: ZfpScalarType, ndim: usize) -> Result<ZfpConfig> {
    Ok(match mode {
        Mode::Accuracy => ZfpConfig::fixed_accuracy(10f64.powi(meta as i8 as i32)),
        Mode::Precision => ZfpConfig::fixed_precision(meta as u32 + 3 + 2 * ndim as u32),
        Mode::Rate => {
            let bits = if ty == ZfpScalarType::F32 { 32.0 } else { 64.0 };
            let rate = meta as f64 / 100.0 * bits;
            let dims = ZfpDimensionality::try_from(ndim as u32)
                .map_err(|e| Error::unsupported(format!("zfp_rate stream: {e}")))?;
            ZfpConfig::fixed_rate(rate, ty, dims, ZfpStreamAlignment::Unaligned).map_err(|e| {
                Error::unsupported(format!(
                    "zfp_rate stream: rate {rate} bits a value (meta {meta}): {e}"
                ))
            })?
        }
    })
}

/// Decode into `dst` as a field of `T`: in place when `dst` is aligned for
/// `T`, else through an aligned buffer.
fn decode_into<T: ZfpScalar + bytemuck::Pod + Default>(
    bs: &mut ZfpBitStreamRef,
    config: &ZfpConfig,
    dims: [usize; MAX_DIMS],
    dst: &mut [u8],
) -> std::result::Result<(), String> {
    if let Ok(out) = bytemuck::try_cast_slice_mut::<u8, T>(dst) {
        let mut field = ZfpFieldMut::new(out, dims).map_err(|e| e.to_string())?;
        bs.decompress(config, &mut field)
            .map_err(|e| e.to_string())?;
        return Ok(());
    }
    let mut tmp = vec![T::default(); dst.len() / std::mem::size_of::<T>()];
    let mut field = ZfpFieldMut::new(&mut tmp[..], dims).map_err(|e| e.to_string())?;
    bs.decompress(config, &mut field)
        .map_err(|e| e.to_string())?;
    dst.copy_from_slice(bytemuck::cast_slice(&tmp));
    Ok(())
}
