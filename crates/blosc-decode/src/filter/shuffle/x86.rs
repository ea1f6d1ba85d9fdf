//! SSE2 (x86_64 baseline) and AVX2 transposes.
//!
//! Every kernel checks with `assert!` that the slices hold exactly
//! `ts * n` bytes and that `n` is at least one vector of elements; all
//! pointer offsets below are then in bounds by construction (each is
//! argued at its use).

use std::arch::x86_64::*;

/// Byte-interleave network: `TS` rows of 16 bytes (row `j` = byte `j`
/// of 16 consecutive elements) become `TS` vectors holding those 16
/// elements in order (`16 / TS` elements per vector). `TS` is a power of
/// two <= 16; `TS = 1` is the identity. After round `r` each vector
/// holds runs of `2^r` bytes of one element, so `log2(TS)` rounds of
/// pairing row `k` with row `k + TS/2` complete the transpose.
#[inline(always)]
pub(crate) fn net128<const TS: usize>(mut v: [__m128i; TS]) -> [__m128i; TS] {
    for _ in 0..TS.trailing_zeros() {
        let mut o = v;
        for k in 0..TS / 2 {
            // SAFETY: SSE2 is part of the x86_64 baseline.
            unsafe {
                o[2 * k] = _mm_unpacklo_epi8(v[k], v[k + TS / 2]);
                o[2 * k + 1] = _mm_unpackhi_epi8(v[k], v[k + TS / 2]);
            }
        }
        v = o;
    }
    v
}

/// The same network on 256-bit vectors: unpacks work within each 128-bit
/// lane, so lane 0 transposes elements 0..16 and lane 1 elements 16..32.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn net256<const TS: usize>(mut v: [__m256i; TS]) -> [__m256i; TS] {
    for _ in 0..TS.trailing_zeros() {
        let mut o = v;
        for k in 0..TS / 2 {
            o[2 * k] = _mm256_unpacklo_epi8(v[k], v[k + TS / 2]);
            o[2 * k + 1] = _mm256_unpackhi_epi8(v[k], v[k + TS / 2]);
        }
        v = o;
    }
    v
}

/// The starts of the tiles of `w` elements covering `0..n` (`n >= w`):
/// whole tiles, then one last tile ending at `n` that overlaps the one
/// before (it rewrites some elements with the same bytes). Every start
/// is at most `n - w`.
#[inline(always)]
pub(crate) fn tile_starts(n: usize, w: usize) -> impl Iterator<Item = usize> {
    (0..n / w)
        .map(move |k| k * w)
        .chain((!n.is_multiple_of(w)).then(|| n - w))
}

/// Transpose elements `i..i + 16` of a `TS x n` matrix.
///
/// # Safety
/// `s` and `d` must be valid for `TS * n` bytes and `i + 16 <= n`: row
/// `j` is read at `j * n + i .. j * n + i + 16 <= (j + 1) * n`, and the
/// output goes to `i * TS .. (i + 16) * TS <= n * TS`.
#[inline(always)]
unsafe fn tile128<const TS: usize>(s: *const u8, d: *mut u8, n: usize, i: usize) {
    // SAFETY: SSE2 is part of the x86_64 baseline; the loads and stores
    // stay within the bounds stated above, which the caller keeps.
    unsafe {
        let mut v = [_mm_setzero_si128(); TS];
        for (j, r) in v.iter_mut().enumerate() {
            *r = _mm_loadu_si128(s.add(j * n + i).cast());
        }
        let o = net128::<TS>(v);
        for (k, x) in o.iter().enumerate() {
            _mm_storeu_si128(d.add(i * TS + 16 * k).cast(), *x);
        }
    }
}

/// SSE2 transpose of a `TS x n` matrix, `TS` in {2, 4, 8, 16}, `n >= 16`.
pub(crate) fn pow2_sse2<const TS: usize>(src: &[u8], dst: &mut [u8], n: usize) {
    assert!(n >= 16 && n.checked_mul(TS) == Some(src.len()) && src.len() == dst.len());
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    for i in tile_starts(n, 16) {
        // SAFETY: both buffers hold `TS * n` bytes (asserted) and every tile
        // starts at `i <= n - 16`.
        unsafe { tile128::<TS>(s, d, n, i) };
    }
}

/// Transpose elements `i..i + 32` of a `TS x n` matrix.
///
/// # Safety
/// AVX2 available; `s` and `d` valid for `TS * n` bytes; `i + 32 <= n`
/// (same bounds argument as `tile128`, with 32 elements).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn tile256<const TS: usize>(s: *const u8, d: *mut u8, n: usize, i: usize) {
    let mut v = [_mm256_setzero_si256(); TS];
    for (j, r) in v.iter_mut().enumerate() {
        // SAFETY: row `j` at `j * n + i .. + 32 <= (j + 1) * n` (the
        // caller keeps `i + 32 <= n`), within `s`.
        *r = unsafe { _mm256_loadu_si256(s.add(j * n + i).cast()) };
    }
    let o = net256::<TS>(v);
    // Lane 0 of the vectors is elements i..i+16 (16 * TS bytes), lane 1
    // elements i+16..i+32: regroup lanes pairwise before storing.
    for k in 0..TS / 2 {
        let lo = _mm256_permute2x128_si256::<0x20>(o[2 * k], o[2 * k + 1]);
        let hi = _mm256_permute2x128_si256::<0x31>(o[2 * k], o[2 * k + 1]);
        // SAFETY: both stores land in `i * TS .. (i + 32) * TS <= n * TS`,
        // within `d`.
        unsafe {
            _mm256_storeu_si256(d.add(i * TS + 32 * k).cast(), lo);
            _mm256_storeu_si256(d.add(i * TS + 16 * TS + 32 * k).cast(), hi);
        }
    }
}

/// AVX2 transpose of a `TS x n` matrix, `TS` in {2, 4, 8, 16}, `n >= 32`.
#[target_feature(enable = "avx2")]
pub(crate) fn pow2_avx2<const TS: usize>(src: &[u8], dst: &mut [u8], n: usize) {
    assert!(n >= 32 && n.checked_mul(TS) == Some(src.len()) && src.len() == dst.len());
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    for i in tile_starts(n, 32) {
        // SAFETY: as in `pow2_sse2`, every tile starts at `i <= n - 32`;
        // AVX2 is enabled in this function.
        unsafe { tile256::<TS>(s, d, n, i) };
    }
}

/// Transpose rows `j0..j0 + G` of elements `i..i + 16` of a `ts x n`
/// matrix: each element receives `G` contiguous bytes at `j0`.
///
/// # Safety
/// `s` and `d` valid for `ts * n` bytes, `i + 16 <= n`, `j0 + G <= ts`,
/// `G` a power of two <= 16. Reads: row `j0 + r` at `(j0 + r) * n + i`,
/// 16 bytes, within row `j0 + r < ts`. Writes: element `i + e < n` at
/// `(i + e) * ts + j0 .. + G <= (i + e + 1) * ts <= n * ts`.
#[inline(always)]
unsafe fn group<const G: usize>(
    s: *const u8,
    d: *mut u8,
    ts: usize,
    n: usize,
    i: usize,
    j0: usize,
) {
    // SAFETY: SSE2 is part of the x86_64 baseline; the reads and
    // writes in `s` and `d` are those bounded above (the caller keeps
    // the conditions), and those in `buf` end at `16 * G <= 256`.
    unsafe {
        let mut v = [_mm_setzero_si128(); G];
        for (r, x) in v.iter_mut().enumerate() {
            *x = _mm_loadu_si128(s.add((j0 + r) * n + i).cast());
        }
        let o = net128::<G>(v);
        let mut buf = [0u8; 256];
        for (k, x) in o.iter().enumerate() {
            _mm_storeu_si128(buf.as_mut_ptr().add(16 * k).cast(), *x);
        }
        for e in 0..16 {
            std::ptr::copy_nonoverlapping(buf.as_ptr().add(e * G), d.add((i + e) * ts + j0), G);
        }
    }
}

/// Transpose elements `i..i + 16` of a `ts x n` matrix, `ts < P < 2 * ts`
/// (`P` a power of two <= 16), as if it had `P` rows: the missing rows
/// repeat row 0, and each element is stored as `P` bytes at `e * ts`,
/// in ascending order, so its last `P - ts` (wrong) bytes fall on the
/// start of the next element and are overwritten by it. Those of the
/// last element fall on element `i + 16`, which a later tile rewrites.
///
/// # Safety
/// `s` and `d` valid for `ts * n` bytes and `i + 17 <= n`. Reads: rows
/// `j < ts` at `j * n + i`, 16 bytes, within row `j`. Writes: element
/// `i + e` at `(i + e) * ts .. + P`, and `P < 2 * ts` keeps the last
/// one below `(i + 17) * ts <= n * ts`.
#[inline(always)]
unsafe fn padded<const P: usize>(s: *const u8, d: *mut u8, ts: usize, n: usize, i: usize) {
    // SAFETY: SSE2 is part of the x86_64 baseline; the reads and
    // writes in `s` and `d` are those bounded above (the caller keeps
    // the conditions), and those in `buf` end at `16 * P <= 256`.
    unsafe {
        let mut v = [_mm_setzero_si128(); P];
        for (r, x) in v.iter_mut().enumerate() {
            let j = if r < ts { r } else { 0 };
            *x = _mm_loadu_si128(s.add(j * n + i).cast());
        }
        let o = net128::<P>(v);
        let mut buf = [0u8; 256];
        for (k, x) in o.iter().enumerate() {
            _mm_storeu_si128(buf.as_mut_ptr().add(16 * k).cast(), *x);
        }
        for e in 0..16 {
            std::ptr::copy_nonoverlapping(buf.as_ptr().add(e * P), d.add((i + e) * ts), P);
        }
    }
}

/// SSE2 transpose of a `ts x n` matrix for any `ts >= 2`, `n >= 16`.
pub(crate) fn generic_sse2(ts: usize, src: &[u8], dst: &mut [u8], n: usize) {
    assert!(ts >= 2 && n >= 16 && n.checked_mul(ts) == Some(src.len()) && src.len() == dst.len());
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    // Small typesizes that are not a power of two: padded to the next
    // one while another element follows the tile (see `padded`).
    let pad = match ts {
        3 => 4,
        5..=7 => 8,
        9..=15 => 16,
        _ => 0,
    };
    let mut i = 0;
    if pad > 0 {
        // SAFETY: `i + 17 <= n` before each call; the buffers hold
        // `ts * n` bytes (asserted); `ts < pad < 2 * ts`.
        unsafe {
            while i + 17 <= n {
                match pad {
                    4 => padded::<4>(s, d, ts, n, i),
                    8 => padded::<8>(s, d, ts, n, i),
                    _ => padded::<16>(s, d, ts, n, i),
                }
                i += 16;
            }
        }
    }
    while i < n {
        // Full tiles, then one last tile overlapping the previous one.
        let t = if i + 16 <= n { i } else { n - 16 };
        let mut j0 = 0;
        // SAFETY: `t + 16 <= n` and `j0 + G <= ts` before each call; the
        // buffers hold `ts * n` bytes (asserted).
        unsafe {
            while ts - j0 >= 16 {
                group::<16>(s, d, ts, n, t, j0);
                j0 += 16;
            }
            if ts - j0 >= 8 {
                group::<8>(s, d, ts, n, t, j0);
                j0 += 8;
            }
            if ts - j0 >= 4 {
                group::<4>(s, d, ts, n, t, j0);
                j0 += 4;
            }
            if ts - j0 >= 2 {
                group::<2>(s, d, ts, n, t, j0);
                j0 += 2;
            }
            if ts - j0 >= 1 {
                group::<1>(s, d, ts, n, t, j0);
            }
        }
        i += 16;
    }
}
