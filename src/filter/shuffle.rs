//! Byte (un)shuffle.
//!
//! A shuffled buffer holds byte 0 of every element, then byte 1 of every
//! element, and so on; the trailing `len % typesize` bytes are not shuffled.
//! Unshuffling is a transpose of an `typesize x n` byte matrix; for the common
//! typesizes it works on 16-element tiles with the typesize known at compile
//! time, which the compiler turns into vector code.

/// Undo a byte shuffle of `src` (typesize `ts`) into `dst` (same length).
pub fn unshuffle(ts: usize, src: &[u8], dst: &mut [u8]) {
    debug_assert_eq!(src.len(), dst.len());
    let n = src.len() / ts.max(1);
    if ts <= 1 || n == 0 {
        dst.copy_from_slice(src);
        return;
    }
    match ts {
        2 => fixed::<2>(src, dst, n),
        4 => fixed::<4>(src, dst, n),
        8 => fixed::<8>(src, dst, n),
        16 => fixed::<16>(src, dst, n),
        _ => generic(ts, src, dst, n),
    }
    let tail = n * ts;
    dst[tail..].copy_from_slice(&src[tail..]);
}

fn generic(ts: usize, src: &[u8], dst: &mut [u8], n: usize) {
    for j in 0..ts {
        let stream = &src[j * n..(j + 1) * n];
        for (i, &b) in stream.iter().enumerate() {
            dst[i * ts + j] = b;
        }
    }
}

const TILE: usize = 16;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_matches_generic() {
        let mut seed = 3u64;
        for ts in [2usize, 3, 4, 8, 12, 16] {
            for len in [0usize, 1, 15, 16, 17, 100, 255, 256, 1000, 4099] {
                let src: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                        (seed >> 33) as u8
                    })
                    .collect();
                let mut a = vec![0u8; len];
                let mut b = vec![0u8; len];
                unshuffle(ts, &src, &mut a);
                let n = len / ts;
                generic(ts, &src, &mut b, n);
                b[n * ts..].copy_from_slice(&src[n * ts..]);
                assert_eq!(a, b, "ts {ts} len {len}");
            }
        }
    }
}
