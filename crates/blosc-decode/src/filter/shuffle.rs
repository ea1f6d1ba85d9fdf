//! Byte (un)shuffle.
//!
//! A shuffled buffer holds byte 0 of every element, then byte 1 of every
//! element, and so on; the trailing `len % typesize` bytes are not shuffled.
//! Unshuffling is a transpose of a `typesize x n` byte matrix.
//!
//! On x86_64 the transpose runs on vectors: `typesize` rows of 16 (SSE2) or
//! 32 (AVX2) bytes are interleaved by `log2(typesize)` rounds of byte
//! unpacks, which leaves the 16 or 32 elements in order (AVX2 for typesizes
//! 2, 4, 8 and 16, SSE2 for the rest). Typesizes 3, 5-7 and 9-15 are
//! transposed as the next power of two, each element stored with its padding
//! bytes that the next element then overwrites; the last tile, and larger
//! typesizes, are cut into groups of 16, 8, 4, 2 and 1 rows, each transposed
//! the same way. The instruction set is detected once (`simd::level`).
//! Elsewhere a portable tiled transpose is used.

use super::simd::{level, Level};

/// Undo a byte shuffle of `src` (typesize `ts`) into `dst` (same length).
///
/// Panics if the lengths differ.
pub fn unshuffle(ts: usize, src: &[u8], dst: &mut [u8]) {
    assert_eq!(
        src.len(),
        dst.len(),
        "unshuffle: source and destination lengths differ"
    );
    let n = src.len() / ts.max(1);
    if ts <= 1 || n == 0 {
        dst.copy_from_slice(src);
        return;
    }
    let body = n * ts;
    transpose(level(), ts, &src[..body], &mut dst[..body], n);
    dst[body..].copy_from_slice(&src[body..]);
}

/// Bytes `lo..lo + dst.len()` of the unshuffle of `src` (typesize `ts`),
/// without unshuffling the rest: for a read of a few KiB of a large block.
///
/// Panics if the range is not inside `src`.
pub fn unshuffle_range(ts: usize, src: &[u8], lo: usize, dst: &mut [u8]) {
    let hi = lo + dst.len();
    assert!(
        hi <= src.len(),
        "unshuffle_range: {lo}..{hi} past {}",
        src.len()
    );
    let n = src.len() / ts.max(1);
    if ts <= 1 || n == 0 {
        dst.copy_from_slice(&src[lo..hi]);
        return;
    }
    let body = n * ts;
    let mid = hi.min(body).max(lo);
    // Whole elements e0..e1 are transposed with the vector kernels, their
    // rows first copied next to each other (at most `TMP` bytes at a time);
    // the bytes of the partial elements at either end one by one.
    const TMP: usize = 16 << 10;
    let (e0, e1) = (lo.div_ceil(ts), mid / ts);
    if e1 > e0 && ts <= TMP {
        gather(ts, n, src, lo, &mut dst[..e0 * ts - lo]);
        let mut tmp = [0u8; TMP];
        let per = TMP / ts;
        let mut e = e0;
        while e < e1 {
            let m = per.min(e1 - e);
            for j in 0..ts {
                tmp[j * m..(j + 1) * m].copy_from_slice(&src[j * n + e..j * n + e + m]);
            }
            let at = e * ts - lo;
            transpose(level(), ts, &tmp[..ts * m], &mut dst[at..at + ts * m], m);
            e += m;
        }
        gather(ts, n, src, e1 * ts, &mut dst[e1 * ts - lo..mid - lo]);
    } else {
        gather(ts, n, src, lo, &mut dst[..mid - lo]);
    }
    dst[mid - lo..].copy_from_slice(&src[mid..hi]);
}

/// Bytes `lo..lo + dst.len()` (inside the shuffled body of `n` elements)
/// of the unshuffle, one by one: byte j of element e is at `j * n + e`.
fn gather(ts: usize, n: usize, src: &[u8], lo: usize, dst: &mut [u8]) {
    let (mut e, mut j) = (lo / ts, lo % ts);
    for d in dst {
        *d = src[j * n + e];
        j += 1;
        if j == ts {
            j = 0;
            e += 1;
        }
    }
}

/// Transpose the `ts x n` matrix `src` into `dst` (both exactly `ts * n`
/// bytes, `ts >= 2`) with the kernels of level `l` (capped at the detected one).
pub(crate) fn transpose(l: Level, ts: usize, src: &[u8], dst: &mut [u8], n: usize) {
    // Never above what the CPU has, whatever the caller asked for.
    let l = l.min(level());
    #[cfg(target_arch = "x86_64")]
    {
        if l == Level::Avx2 && n >= 32 && matches!(ts, 2 | 4 | 8 | 16) {
            // SAFETY: `l` is at most `level()`, which is Avx2 only when AVX2
            // was detected on this CPU; the kernel asserts its length
            // preconditions itself.
            unsafe {
                match ts {
                    2 => x86::pow2_avx2::<2>(src, dst, n),
                    4 => x86::pow2_avx2::<4>(src, dst, n),
                    8 => x86::pow2_avx2::<8>(src, dst, n),
                    _ => x86::pow2_avx2::<16>(src, dst, n),
                }
            }
            return;
        }
        if l >= Level::Sse2 && n >= 16 {
            match ts {
                2 => x86::pow2_sse2::<2>(src, dst, n),
                4 => x86::pow2_sse2::<4>(src, dst, n),
                8 => x86::pow2_sse2::<8>(src, dst, n),
                16 => x86::pow2_sse2::<16>(src, dst, n),
                _ => x86::generic_sse2(ts, src, dst, n),
            }
            return;
        }
    }
    let _ = l;
    match ts {
        2 => fixed::<2>(src, dst, n),
        4 => fixed::<4>(src, dst, n),
        8 => fixed::<8>(src, dst, n),
        16 => fixed::<16>(src, dst, n),
        _ => generic(ts, src, dst, n),
    }
}

/// The definition: a plain strided transpose (also the reference in tests).
fn generic(ts: usize, src: &[u8], dst: &mut [u8], n: usize) {
    for j in 0..ts {
        let stream = &src[j * n..(j + 1) * n];
        for (i, &b) in stream.iter().enumerate() {
            dst[i * ts + j] = b;
        }
    }
}

/// Scalar reference of `unshuffle` (the definition, tail included).
#[cfg(test)]
pub(crate) fn scalar_unshuffle(ts: usize, src: &[u8], dst: &mut [u8]) {
    let n = src.len() / ts.max(1);
    if ts <= 1 {
        dst.copy_from_slice(src);
        return;
    }
    generic(ts, src, dst, n);
    dst[n * ts..].copy_from_slice(&src[n * ts..]);
}

const TILE: usize = 16;

/// Portable transpose on 16-element tiles with the typesize known at compile
/// time (the compiler vectorises it where it can).
fn fixed<const TS: usize>(src: &[u8], dst: &mut [u8], n: usize) {
    let tiles = n / TILE;
    let out = &mut dst[..n * TS];
    for t in 0..tiles {
        let mut tile = [[0u8; TILE]; TS];
        for (j, row) in tile.iter_mut().enumerate() {
            row.copy_from_slice(&src[j * n + t * TILE..j * n + t * TILE + TILE]);
        }
        let o = &mut out[t * TILE * TS..(t + 1) * TILE * TS];
        for (i, e) in o.chunks_exact_mut(TS).enumerate() {
            for j in 0..TS {
                e[j] = tile[j][i];
            }
        }
    }
    for i in tiles * TILE..n {
        for j in 0..TS {
            out[i * TS + j] = src[j * n + i];
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
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
        assert!(
            ts >= 2 && n >= 16 && n.checked_mul(ts) == Some(src.len()) && src.len() == dst.len()
        );
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(len: usize, seed: &mut u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                (*seed >> 33) as u8
            })
            .collect()
    }

    /// A range of the unshuffle equals that range of the whole unshuffle,
    /// for ranges inside the shuffled body, across its end and in the tail.
    #[test]
    fn unshuffle_range_is_a_slice_of_unshuffle() {
        let mut seed = 7;
        for ts in [1usize, 2, 3, 4, 7, 8, 16, 17, 255] {
            for len in [0usize, 1, ts, 5 * ts + 3, 4096 + 5, 65_536 + ts - 1] {
                let src = bytes(len, &mut seed);
                let mut whole = vec![0u8; len];
                unshuffle(ts, &src, &mut whole);
                let mut ranges = vec![
                    (0, len),
                    (len / 3, len / 2),
                    (len.saturating_sub(ts + 2), len),
                ];
                for _ in 0..20 {
                    let a = (bytes(4, &mut seed)
                        .iter()
                        .fold(0usize, |x, &b| x * 256 + b as usize))
                        % (len + 1);
                    let b = a + (bytes(2, &mut seed)[0] as usize * 37) % (len - a + 1);
                    ranges.push((a, b));
                }
                for (a, b) in ranges {
                    let mut part = vec![0xEEu8; b - a];
                    unshuffle_range(ts, &src, a, &mut part);
                    assert_eq!(part, whole[a..b], "ts {ts} len {len} range {a}..{b}");
                }
            }
        }
    }

    /// Lengths around every vector width and tile boundary, for typesize `ts`.
    fn lengths(ts: usize) -> Vec<usize> {
        let mut v = vec![0, 1, ts - 1, ts, ts + 1, 256 * 1024, 256 * 1024 + 3];
        for n in [
            1usize, 2, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 100, 1000,
        ] {
            for extra in [0, 1, ts - 1] {
                v.push(n * ts + extra);
            }
        }
        v
    }

    fn check_all(f: impl Fn(usize, &[u8], &mut [u8]), what: &str) {
        let mut seed = 3u64;
        for ts in 1..=32usize {
            for len in lengths(ts) {
                let src = bytes(len, &mut seed);
                let mut a = vec![0xAAu8; len];
                let mut b = vec![0x55u8; len];
                f(ts, &src, &mut a);
                scalar_unshuffle(ts, &src, &mut b);
                assert_eq!(a, b, "{what}: ts {ts} len {len}");
            }
        }
    }

    #[test]
    fn dispatched_matches_scalar() {
        check_all(unshuffle, "dispatched");
    }

    fn at_level(l: Level) -> impl Fn(usize, &[u8], &mut [u8]) {
        move |ts, src, dst| {
            let n = src.len() / ts;
            if ts <= 1 || n == 0 {
                dst.copy_from_slice(src);
                return;
            }
            let body = n * ts;
            transpose(l, ts, &src[..body], &mut dst[..body], n);
            dst[body..].copy_from_slice(&src[body..]);
        }
    }

    #[test]
    fn portable_matches_scalar() {
        check_all(at_level(Level::Scalar), "portable");
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn sse2_matches_scalar() {
        check_all(at_level(Level::Sse2), "sse2");
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx2_matches_scalar() {
        if level() == Level::Avx2 {
            check_all(at_level(Level::Avx2), "avx2");
        }
    }

    #[test]
    fn unaligned_buffers() {
        let mut seed = 17u64;
        let big = bytes(70_000, &mut seed);
        for ts in [2usize, 3, 4, 7, 8, 12, 16, 24] {
            for (so, dof) in [(1usize, 0usize), (3, 5), (7, 13), (0, 31)] {
                let len = 64_000 + ts - 1;
                let src = &big[so..so + len];
                let mut out = vec![0u8; len + 64];
                let mut want = vec![0u8; len];
                unshuffle(ts, src, &mut out[dof..dof + len]);
                scalar_unshuffle(ts, src, &mut want);
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
    fn zero_typesize_copies() {
        let src = [1u8, 2, 3];
        let mut dst = [0u8; 3];
        unshuffle(0, &src, &mut dst);
        assert_eq!(dst, src);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any typesize (0 and larger than the buffer included), any length.
        #[test]
        fn unshuffle_equals_scalar(
            ts in prop_oneof![0usize..=33, 0usize..300],
            src in proptest::collection::vec(any::<u8>(), 0..4000),
        ) {
            let mut a = vec![0u8; src.len()];
            let mut b = vec![1u8; src.len()];
            unshuffle(ts, &src, &mut a);
            scalar_unshuffle(ts, &src, &mut b);
            prop_assert_eq!(a, b);
        }
    }
}
