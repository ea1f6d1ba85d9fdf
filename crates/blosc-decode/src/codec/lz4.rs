//! LZ4 block streams, decoded by the reference LZ4 library (`lz4-sys`
//! builds it from source): its `LZ4_decompress_safe` never reads or
//! writes outside the buffers it is given, whatever the input.
//!
//! Byte-shuffled numeric data compresses into matches that overlap their
//! own output (runs of one to a few bytes repeated, at offsets below 8),
//! which the reference library copies eight bytes at a time where
//! `lz4_flex` copies them one by one: on a float64 series its decoding
//! took 1.7x as long.

use crate::error::{Error, Result};
use std::os::raw::{c_char, c_int};

extern "C" {
    // In the library `lz4-sys` builds (lz4.c), not in its bindings.
    fn LZ4_decompress_safe_usingDict(
        src: *const c_char,
        dst: *mut c_char,
        src_size: c_int,
        dst_capacity: c_int,
        dict_start: *const c_char,
        dict_size: c_int,
    ) -> c_int;
}

/// Decompress the raw LZ4 block `src` into `dst` (with the chunk's
/// dictionary `dict`, if any): the bytes written.
pub(super) fn decompress(src: &[u8], dst: &mut [u8], dict: Option<&[u8]>) -> Result<usize> {
    let too_big = || Error::corrupt("lz4 stream or block larger than 2 GiB");
    let src_len = c_int::try_from(src.len()).map_err(|_| too_big())?;
    let dst_len = c_int::try_from(dst.len()).map_err(|_| too_big())?;
    let n = match dict {
        // SAFETY: the pointers and lengths are those of `src` and `dst`;
        // LZ4_decompress_safe reads at most `src_len` bytes of `src` and
        // writes at most `dst_len` bytes into `dst`, for any input.
        None => unsafe {
            lz4_sys::LZ4_decompress_safe(
                src.as_ptr().cast(),
                dst.as_mut_ptr().cast(),
                src_len,
                dst_len,
            )
        },
        Some(d) => {
            let d_len = c_int::try_from(d.len()).map_err(|_| too_big())?;
            // SAFETY: as above, and the dictionary is read only within
            // `d` (its start and length), which does not overlap `dst`.
            unsafe {
                LZ4_decompress_safe_usingDict(
                    src.as_ptr().cast(),
                    dst.as_mut_ptr().cast(),
                    src_len,
                    dst_len,
                    d.as_ptr().cast(),
                    d_len,
                )
            }
        }
    };
    usize::try_from(n).map_err(|_| {
        Error::corrupt(format!(
            "lz4 stream: malformed ({} compressed bytes do not decode into {} bytes)",
            src.len(),
            dst.len()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::decompress;

    /// Shuffled-float-like bytes: runs and short repeats (overlapping
    /// matches at offsets 1-7) between noise.
    fn sample() -> Vec<u8> {
        let mut v = Vec::new();
        let mut seed = 7u32;
        for i in 0..20_000u32 {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            match i % 5 {
                0 => v.extend(std::iter::repeat_n((i % 7) as u8, 40)),
                1 => v.extend([1u8, 2, 3].iter().cycle().take(33)),
                _ => v.push((seed >> 16) as u8),
            }
        }
        v
    }

    #[test]
    fn decodes_what_lz4_flex_encodes_with_and_without_a_dictionary() {
        let data = sample();
        let mut out = vec![0u8; data.len()];
        let c = lz4_flex::block::compress(&data);
        assert_eq!(decompress(&c, &mut out, None).unwrap(), data.len());
        assert_eq!(out, data);
        let dict = &data[1000..9000];
        let c = lz4_flex::block::compress_with_dict(&data, dict);
        out.fill(0);
        assert_eq!(decompress(&c, &mut out, Some(dict)).unwrap(), data.len());
        assert_eq!(out, data);
    }

    #[test]
    fn malformed_streams_are_errors() {
        let data = sample();
        let c = lz4_flex::block::compress(&data);
        let mut out = vec![0u8; data.len()];
        // Cut short, output too small, a match before the start, garbage.
        assert!(decompress(&c[..c.len() / 2], &mut out, None).is_err());
        assert!(decompress(&c, &mut out[..data.len() / 2], None).is_err());
        assert!(decompress(&[0x0f, 0xff, 0xff], &mut out, None).is_err());
        assert!(decompress(&[0x00, 0x05, 0x00], &mut out, None).is_err());
        let e = decompress(&[0xff; 64], &mut out, None).unwrap_err();
        assert!(e.to_string().contains("lz4 stream"), "{e}");
        // Nothing to decode into.
        assert!(decompress(&c, &mut [], None).is_err());
    }
}
