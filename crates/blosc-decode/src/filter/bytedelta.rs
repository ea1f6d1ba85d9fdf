//! Bytedelta (registered filter 35), decode direction.
//!
//! Applied after a byte shuffle: each of the `ts` byte streams (of
//! `len / ts` bytes) was replaced by its differences; decoding is a running
//! wrapping sum per stream. Trailing bytes that do not fill an element are
//! passed through.
//!
//! On x86_64 the running sum works on 16-byte vectors: an in-register
//! prefix sum (4 shifted adds), plus the running total broadcast to all
//! bytes, which is advanced by the broadcast last byte of each prefix sum so
//! that the loop's only dependency is one add per vector.

use super::simd::{level, Level};
use crate::error::{Error, Result};

/// Undo bytedelta on `src` into `dst` (same length) for items of `ts` bytes: each byte plane is a running sum of its bytes.
pub fn decode(ts: usize, src: &[u8], dst: &mut [u8]) -> Result<()> {
    if ts == 0 {
        return Err(Error::corrupt("bytedelta with typesize 0"));
    }
    assert_eq!(
        src.len(),
        dst.len(),
        "bytedelta: source and destination lengths differ"
    );
    let stream = src.len() / ts;
    let l = level();
    for s in 0..ts {
        let range = s * stream..(s + 1) * stream;
        prefix_sum(l, &src[range.clone()], &mut dst[range]);
    }
    let done = stream * ts;
    dst[done..].copy_from_slice(&src[done..]);
    Ok(())
}

/// `dst[i] = src[0] + ... + src[i]` (wrapping), same lengths.
fn prefix_sum(l: Level, src: &[u8], dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    let (done, mut acc) = if l >= Level::Sse2 {
        x86::prefix_sum_sse2(src, dst)
    } else {
        (0, 0u8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let (done, mut acc) = {
        let _ = l;
        (0, 0u8)
    };
    for (o, &i) in dst[done..].iter_mut().zip(&src[done..]) {
        acc = acc.wrapping_add(i);
        *o = acc;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Prefix sums of the whole 16-byte chunks of `src` into `dst`:
    /// returns how many bytes were done and the running total after them.
    pub(super) fn prefix_sum_sse2(src: &[u8], dst: &mut [u8]) -> (usize, u8) {
        let n = src.len().min(dst.len()) / 16 * 16;
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        // SAFETY: SSE2 is part of the x86_64 baseline; every access is
        // 16 bytes at `i` with `i + 16 <= n <= len` of both slices.
        unsafe {
            let mut acc = _mm_setzero_si128();
            while i < n {
                let mut x = _mm_loadu_si128(s.add(i).cast());
                x = _mm_add_epi8(x, _mm_slli_si128::<1>(x));
                x = _mm_add_epi8(x, _mm_slli_si128::<2>(x));
                x = _mm_add_epi8(x, _mm_slli_si128::<4>(x));
                x = _mm_add_epi8(x, _mm_slli_si128::<8>(x));
                _mm_storeu_si128(d.add(i).cast(), _mm_add_epi8(x, acc));
                // Broadcast byte 15 of the chunk's own sum into the total.
                let t = _mm_unpackhi_epi8(x, x);
                let t = _mm_unpackhi_epi16(t, t);
                acc = _mm_add_epi8(acc, _mm_shuffle_epi32::<0xFF>(t));
                i += 16;
            }
            (n, _mm_cvtsi128_si32(acc) as u8)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar_decode(ts: usize, src: &[u8], dst: &mut [u8]) {
        let stream = src.len() / ts;
        for s in 0..ts {
            let mut acc = 0u8;
            for i in s * stream..(s + 1) * stream {
                acc = acc.wrapping_add(src[i]);
                dst[i] = acc;
            }
        }
        dst[stream * ts..].copy_from_slice(&src[stream * ts..]);
    }

    #[test]
    fn matches_definition() {
        let mut seed = 21u64;
        for ts in 1..=20usize {
            for len in (0..70usize).chain([255, 256, 1000, 4096 + 7, 65536 + 13]) {
                let src: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(3);
                        (seed >> 33) as u8
                    })
                    .collect();
                let mut a = vec![0xAAu8; len];
                let mut b = vec![0x55u8; len];
                decode(ts, &src, &mut a).unwrap();
                scalar_decode(ts, &src, &mut b);
                assert_eq!(a, b, "ts {ts} len {len}");
                let mut c = vec![0x11u8; len];
                let stream = len / ts;
                for s in 0..ts {
                    let r = s * stream..(s + 1) * stream;
                    prefix_sum(Level::Scalar, &src[r.clone()], &mut c[r]);
                }
                c[stream * ts..].copy_from_slice(&src[stream * ts..]);
                assert_eq!(c, b, "portable: ts {ts} len {len}");
            }
        }
    }

    #[test]
    fn zero_typesize_is_an_error() {
        assert!(decode(0, &[1, 2], &mut [0, 0]).is_err());
    }
}
