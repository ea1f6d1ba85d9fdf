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
pub(crate) mod x86;

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
