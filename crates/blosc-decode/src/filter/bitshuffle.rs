//! Bit unshuffle.
//!
//! Bitshuffle stores, for each byte position `j` of an element and each bit
//! `k` of that byte, one row of bits (row `8j + k`) holding that bit of every
//! element, least significant bit first. Undoing it gathers, for every group
//! of 8 elements, the 8 row bytes of each byte position and transposes that
//! 8x8 bit matrix.
//!
//! The rows of byte position `j` (`src[j * n..(j + 1) * n]`) are exactly the
//! bitshuffle of byte stream `j` with typesize 1, so the kernel undoes that
//! typesize-1 bit transpose for each byte position into a small scratch
//! buffer (a cache-sized run of elements at a time) and then byte-unshuffles
//! the scratch into place with `shuffle::transpose`. The typesize-1 kernel
//! loads 16 (SSE2) or 32 (AVX2) groups of each of the 8 rows, transposes
//! those bytes with the unshuffle network (giving one 64-bit 8x8 bit matrix
//! per group) and transposes the bit matrices with shifts and masks on all
//! 64-bit lanes at once.

use super::shuffle;
use super::simd::{level, Level};
use crate::error::Result;

/// Transpose an 8x8 bit matrix held in a u64 (byte r = row r, bit c = column c).
#[inline]
fn transpose8(mut x: u64) -> u64 {
    let mut t;
    t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^= t ^ (t << 28);
    x
}

/// Undo the bit transpose of the first `n` elements (`n % 8 == 0`): the
/// plain definition, used for huge typesizes and as the test reference.
fn untrans_bit_elem(ts: usize, n: usize, src: &[u8], dst: &mut [u8]) {
    let row = n / 8; // bytes per bit row
    for j in 0..ts {
        let rows = &src[j * 8 * row..(j + 1) * 8 * row];
        for g in 0..row {
            let mut x = 0u64;
            for k in 0..8 {
                x |= (rows[k * row + g] as u64) << (8 * k);
            }
            let y = transpose8(x);
            let base = g * 8 * ts + j;
            for m in 0..8 {
                dst[base + m * ts] = (y >> (8 * m)) as u8;
            }
        }
    }
}

/// Undo a bitshuffle of `src` (typesize `ts`) into `dst` (same length).
/// `version` is the chunk format version: version 2 (Blosc1) only
/// bitshuffled blocks whose element count is a multiple of 8; later
/// versions transpose the largest multiple of 8 elements and leave the rest.
///
/// Panics if the lengths differ.
pub fn bitunshuffle(ts: usize, src: &[u8], dst: &mut [u8], version: u8) -> Result<()> {
    assert_eq!(
        src.len(),
        dst.len(),
        "bitunshuffle: source and destination lengths differ"
    );
    let ts = ts.max(1);
    let n = elements(ts, src.len(), version);
    let done = n * ts;
    if n > 0 {
        untrans(level(), ts, n, &src[..done], &mut dst[..done]);
    }
    dst[done..].copy_from_slice(&src[done..]);
    Ok(())
}

/// How many leading elements of a `len`-byte block were bit-transposed.
fn elements(ts: usize, len: usize, version: u8) -> usize {
    let size = len / ts;
    if version <= 2 {
        if size.is_multiple_of(8) {
            size
        } else {
            0
        }
    } else {
        size - size % 8
    }
}

/// Scratch for one run of elements of all byte positions (fits in L1).
const SCRATCH: usize = 16 * 1024;

/// Undo the bit transpose of `n` elements (`n % 8 == 0`, `n > 0`), `src`
/// and `dst` exactly `n * ts` bytes, with the kernels of level `l`.
fn untrans(l: Level, ts: usize, n: usize, src: &[u8], dst: &mut [u8]) {
    let row = n / 8;
    if ts == 1 {
        bits1(l, src, row, row, dst);
        return;
    }
    // Elements per run: a multiple of 32 (whole AVX2 tiles) when possible.
    let run = match SCRATCH / ts {
        r if r >= 64 => r & !31,
        r => r & !7,
    };
    if run == 0 {
        untrans_bit_elem(ts, n, src, dst);
        return;
    }
    // Sized to the block (small blocks need only a little of it).
    let mut tmp = vec![0u8; ts * run.min(n)];
    let mut e0 = 0;
    while e0 < n {
        let e = run.min(n - e0); // a multiple of 8, as n and run are
        for j in 0..ts {
            // Rows 8j..8j+8 start at j * n; this run's groups at e0 / 8.
            bits1(
                l,
                &src[j * n + e0 / 8..],
                row,
                e / 8,
                &mut tmp[j * e..(j + 1) * e],
            );
        }
        shuffle::transpose(l, ts, &tmp[..ts * e], &mut dst[e0 * ts..(e0 + e) * ts], e);
        e0 += e;
    }
}

/// The bounds of `bits1`: `7 * stride + groups <= src.len()` and
/// `8 * groups <= dst.len()`, without overflow.
fn rows_fit(src: &[u8], stride: usize, groups: usize, dst: &[u8]) -> bool {
    stride
        .checked_mul(7)
        .and_then(|x| x.checked_add(groups))
        .is_some_and(|x| x <= src.len())
        && groups.checked_mul(8).is_some_and(|x| x <= dst.len())
}

/// Typesize-1 bit untranspose of `groups` groups of 8 elements: row `k`
/// (k < 8) of the bit matrix starts at `src[k * stride]`; element `8g + m`
/// goes to `dst[8g + m]`.
fn bits1(l: Level, src: &[u8], stride: usize, groups: usize, dst: &mut [u8]) {
    assert!(
        groups <= stride && rows_fit(src, stride, groups, dst),
        "bits1: rows out of bounds"
    );
    let l = l.min(level());
    #[cfg(target_arch = "x86_64")]
    {
        if l == Level::Avx2 && groups >= 32 {
            // SAFETY: `l` is at most `level()`, Avx2 only when AVX2 was
            // detected; the bounds were asserted above.
            unsafe { x86::bits1_avx2(src, stride, groups, dst) };
            return;
        }
        if l >= Level::Sse2 && groups >= 16 {
            x86::bits1_sse2(src, stride, groups, dst);
            return;
        }
    }
    let _ = l;
    bits1_scalar(src, stride, 0, groups, dst);
}

/// Portable `bits1` for groups `g0..g1` (same bounds as `bits1`).
fn bits1_scalar(src: &[u8], stride: usize, g0: usize, g1: usize, dst: &mut [u8]) {
    for g in g0..g1 {
        let mut x = 0u64;
        for k in 0..8 {
            x |= (src[k * stride + g] as u64) << (8 * k);
        }
        dst[8 * g..8 * g + 8].copy_from_slice(&transpose8(x).to_le_bytes());
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! SSE2 and AVX2 typesize-1 bit untranspose. The callers have checked
    //! `7 * stride + groups <= src.len()` and `8 * groups <= dst.len()`;
    //! every tile covers groups `g..g + W` with `g + W <= groups`, so row `k`
    //! is read at `k * stride + g .. k * stride + g + W <= src.len()` and the
    //! output written at `8 * g .. 8 * (g + W) <= dst.len()`.

    use super::super::shuffle::x86::{net128, net256, tile_starts};
    use super::rows_fit;
    use std::arch::x86_64::*;

    /// `transpose8` on both 64-bit lanes.
    #[inline(always)]
    fn transpose8x2(mut x: __m128i) -> __m128i {
        // SAFETY: SSE2 is part of the x86_64 baseline.
        unsafe {
            let m1 = _mm_set1_epi64x(0x00AA_00AA_00AA_00AA);
            let m2 = _mm_set1_epi64x(0x0000_CCCC_0000_CCCC);
            let m3 = _mm_set1_epi64x(0x0000_0000_F0F0_F0F0);
            let t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64::<7>(x)), m1);
            x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64::<7>(t)));
            let t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64::<14>(x)), m2);
            x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64::<14>(t)));
            let t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64::<28>(x)), m3);
            _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64::<28>(t)))
        }
    }

    /// `transpose8` on all four 64-bit lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn transpose8x4(mut x: __m256i) -> __m256i {
        let m1 = _mm256_set1_epi64x(0x00AA_00AA_00AA_00AA);
        let m2 = _mm256_set1_epi64x(0x0000_CCCC_0000_CCCC);
        let m3 = _mm256_set1_epi64x(0x0000_0000_F0F0_F0F0);
        let t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64::<7>(x)), m1);
        x = _mm256_xor_si256(x, _mm256_xor_si256(t, _mm256_slli_epi64::<7>(t)));
        let t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64::<14>(x)), m2);
        x = _mm256_xor_si256(x, _mm256_xor_si256(t, _mm256_slli_epi64::<14>(t)));
        let t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64::<28>(x)), m3);
        _mm256_xor_si256(x, _mm256_xor_si256(t, _mm256_slli_epi64::<28>(t)))
    }

    /// Groups `g..g + 16`.
    ///
    /// # Safety
    /// The bounds of the module comment with `W = 16`.
    #[inline(always)]
    unsafe fn tile128(s: *const u8, stride: usize, d: *mut u8, g: usize) {
        // SAFETY: SSE2 is part of the x86_64 baseline; the caller keeps
        // `g + 16 <= groups` and the bounds of the module comment, so each
        // load reads row `k` within `src` and each store writes within `dst`.
        unsafe {
            let mut v = [_mm_setzero_si128(); 8];
            for (k, r) in v.iter_mut().enumerate() {
                *r = _mm_loadu_si128(s.add(k * stride + g).cast());
            }
            // Vector q now holds groups g + 2q and g + 2q + 1, 8 row bytes each.
            let o = net128::<8>(v);
            for (q, x) in o.iter().enumerate() {
                _mm_storeu_si128(d.add(8 * g + 16 * q).cast(), transpose8x2(*x));
            }
        }
    }

    pub(super) fn bits1_sse2(src: &[u8], stride: usize, groups: usize, dst: &mut [u8]) {
        assert!(groups >= 16 && rows_fit(src, stride, groups, dst));
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        for g in tile_starts(groups, 16) {
            // SAFETY: every tile starts at `g <= groups - 16`; bounds asserted above.
            unsafe { tile128(s, stride, d, g) };
        }
    }

    /// Groups `g..g + 32`.
    ///
    /// # Safety
    /// AVX2 available; the bounds of the module comment with `W = 32`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn tile256(s: *const u8, stride: usize, d: *mut u8, g: usize) {
        let mut v = [_mm256_setzero_si256(); 8];
        for (k, r) in v.iter_mut().enumerate() {
            // SAFETY: row `k` at `k * stride + g .. + 32` lies within `src`
            // (the caller keeps `g + 32 <= groups` and the module's bounds).
            *r = unsafe { _mm256_loadu_si256(s.add(k * stride + g).cast()) };
        }
        // Lane 0 of vector q: groups g + 2q, g + 2q + 1; lane 1: the same
        // sixteen groups later.
        let o = net256::<8>(v);
        let mut t = [_mm256_setzero_si256(); 8];
        for (y, x) in t.iter_mut().zip(o) {
            *y = transpose8x4(x);
        }
        for k in 0..4 {
            let lo = _mm256_permute2x128_si256::<0x20>(t[2 * k], t[2 * k + 1]);
            let hi = _mm256_permute2x128_si256::<0x31>(t[2 * k], t[2 * k + 1]);
            // SAFETY: both stores land in `8 * g .. 8 * (g + 32)`, within
            // `dst` by the module's bounds.
            unsafe {
                _mm256_storeu_si256(d.add(8 * g + 32 * k).cast(), lo);
                _mm256_storeu_si256(d.add(8 * g + 128 + 32 * k).cast(), hi);
            }
        }
    }

    /// AVX2 `bits1` for `groups >= 32` (bounds asserted here).
    #[target_feature(enable = "avx2")]
    pub(super) fn bits1_avx2(src: &[u8], stride: usize, groups: usize, dst: &mut [u8]) {
        assert!(groups >= 32 && rows_fit(src, stride, groups, dst));
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        for g in tile_starts(groups, 32) {
            // SAFETY: as in `bits1_sse2`, every tile starts at `g <= groups - 32`;
            // AVX2 is enabled in this function.
            unsafe { tile256(s, stride, d, g) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Straightforward bit-by-bit bitshuffle, the definition.
    fn bitshuffle_ref(ts: usize, n: usize, src: &[u8]) -> Vec<u8> {
        let mut out = src.to_vec();
        out[..n * ts].fill(0);
        let row = n / 8;
        for i in 0..n {
            for j in 0..ts {
                for k in 0..8 {
                    let bit = (src[i * ts + j] >> k) & 1;
                    let r = j * 8 + k;
                    out[r * row + i / 8] |= bit << (i % 8);
                }
            }
        }
        out
    }

    fn bytes(len: usize, seed: &mut u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (*seed >> 33) as u8
            })
            .collect()
    }

    /// The reference: the plain definition of the undo, tail included.
    fn scalar_bitunshuffle(ts: usize, src: &[u8], dst: &mut [u8], version: u8) {
        let ts = ts.max(1);
        let n = elements(ts, src.len(), version);
        if n > 0 {
            untrans_bit_elem(ts, n, src, dst);
        }
        dst[n * ts..].copy_from_slice(&src[n * ts..]);
    }

    #[test]
    fn inverts_the_definition() {
        let mut seed = 7u64;
        for ts in [1usize, 2, 3, 4, 8, 12, 16] {
            for size in [0usize, 8, 16, 24, 64, 72, 13, 100, 256, 1000] {
                let len = size * ts + (ts - 1).min(3);
                let data = bytes(len, &mut seed);
                let n = size - size % 8;
                let shuffled = bitshuffle_ref(ts, n, &data);
                let mut back = vec![0u8; len];
                bitunshuffle(ts, &shuffled, &mut back, 5).unwrap();
                assert_eq!(back, data, "ts {ts} size {size}");
            }
        }
    }

    /// Element counts around the tile widths (16 and 32 groups) and the
    /// scratch runs.
    fn lengths(ts: usize) -> Vec<usize> {
        let run = (SCRATCH / ts) & !31;
        let mut v = vec![0, 1, ts - 1, 256 * 1024, 256 * 1024 + 5];
        for n in [
            1usize,
            7,
            8,
            9,
            64,
            120,
            127,
            128,
            129,
            136,
            248,
            255,
            256,
            257,
            264,
            512,
            1000,
            run,
            run + 8,
            2 * run + 40,
        ] {
            for extra in [0, ts - 1] {
                v.push(n * ts + extra);
            }
        }
        v
    }

    fn check_all(l: Level, what: &str) {
        let mut seed = 11u64;
        for ts in 1..=32usize {
            for len in lengths(ts) {
                let src = bytes(len, &mut seed);
                for version in [2u8, 5] {
                    let mut a = vec![0xAAu8; len];
                    let mut b = vec![0x55u8; len];
                    let n = elements(ts, len, version);
                    if n > 0 {
                        untrans(l, ts, n, &src[..n * ts], &mut a[..n * ts]);
                    }
                    a[n * ts..].copy_from_slice(&src[n * ts..]);
                    scalar_bitunshuffle(ts, &src, &mut b, version);
                    assert_eq!(a, b, "{what}: ts {ts} len {len} version {version}");
                }
            }
        }
    }

    #[test]
    fn dispatched_matches_scalar() {
        let mut seed = 5u64;
        for ts in 1..=32usize {
            for len in lengths(ts) {
                let src = bytes(len, &mut seed);
                for version in [2u8, 5] {
                    let mut a = vec![0xAAu8; len];
                    let mut b = vec![0x55u8; len];
                    bitunshuffle(ts, &src, &mut a, version).unwrap();
                    scalar_bitunshuffle(ts, &src, &mut b, version);
                    assert_eq!(a, b, "ts {ts} len {len} version {version}");
                }
            }
        }
    }

    #[test]
    fn portable_matches_scalar() {
        check_all(Level::Scalar, "portable");
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn sse2_matches_scalar() {
        check_all(Level::Sse2, "sse2");
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx2_matches_scalar() {
        if level() == Level::Avx2 {
            check_all(Level::Avx2, "avx2");
        }
    }

    #[test]
    fn unaligned_buffers() {
        let mut seed = 19u64;
        let big = bytes(70_000, &mut seed);
        for ts in [1usize, 2, 3, 4, 8, 12, 16] {
            for (so, dof) in [(1usize, 0usize), (3, 5), (7, 13), (0, 31)] {
                let len = 64_000 / ts * ts + ts - 1;
                let src = &big[so..so + len];
                let mut out = vec![0u8; len + 64];
                let mut want = vec![0u8; len];
                bitunshuffle(ts, src, &mut out[dof..dof + len], 5).unwrap();
                scalar_bitunshuffle(ts, src, &mut want, 5);
                assert_eq!(
                    &out[dof..dof + len],
                    &want[..],
                    "ts {ts} offsets {so} {dof}"
                );
                assert!(out[..dof].iter().chain(&out[dof + len..]).all(|&b| b == 0));
            }
        }
    }

    #[test]
    fn huge_typesize_and_empty() {
        let mut seed = 1u64;
        for ts in [0usize, 2047, 2048, 2049, 5000] {
            for len in [0usize, 1, 8 * ts.max(1), 8 * ts.max(1) + 3, 16 * ts.max(1)] {
                let src = bytes(len, &mut seed);
                let mut a = vec![0u8; len];
                let mut b = vec![1u8; len];
                bitunshuffle(ts, &src, &mut a, 5).unwrap();
                scalar_bitunshuffle(ts, &src, &mut b, 5);
                assert_eq!(a, b, "ts {ts} len {len}");
            }
        }
    }

    proptest::proptest! {
        /// Any typesize, length and version: the vector paths equal the
        /// definition.
        #[test]
        fn bitunshuffle_equals_scalar(
            ts in proptest::prop_oneof![0usize..=33, 0usize..300],
            version in 0u8..6,
            src in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..6000),
        ) {
            let mut a = vec![0u8; src.len()];
            let mut b = vec![1u8; src.len()];
            bitunshuffle(ts, &src, &mut a, version).unwrap();
            scalar_bitunshuffle(ts, &src, &mut b, version);
            proptest::prop_assert_eq!(a, b);
        }
    }
}
