//! Bit unshuffle.
//!
//! Bitshuffle stores, for each byte position `j` of an element and each bit
//! `k` of that byte, one row of bits (row `8j + k`) holding that bit of every
//! element, least significant bit first. Undoing it gathers, for every group
//! of 8 elements, the 8 row bytes of each byte position and transposes that
//! 8x8 bit matrix.

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

/// Undo the bit transpose of the first `n` elements (`n % 8 == 0`).
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
pub fn bitunshuffle(ts: usize, src: &[u8], dst: &mut [u8], version: u8) -> Result<()> {
    debug_assert_eq!(src.len(), dst.len());
    let ts = ts.max(1);
    let size = src.len() / ts;
    let n = if version <= 2 {
        if size % 8 == 0 {
            size
        } else {
            0
        }
    } else {
        size - size % 8
    };
    if n > 0 {
        untrans_bit_elem(ts, n, src, dst);
    }
    let done = n * ts;
    dst[done..].copy_from_slice(&src[done..]);
    Ok(())
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

    #[test]
    fn inverts_the_definition() {
        let mut seed = 7u64;
        for ts in [1usize, 2, 3, 4, 8, 12, 16] {
            for size in [0usize, 8, 16, 24, 64, 72, 13, 100] {
                let len = size * ts + (ts - 1).min(3);
                let data: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        (seed >> 33) as u8
                    })
                    .collect();
                let n = size - size % 8;
                let shuffled = bitshuffle_ref(ts, n, &data);
                let mut back = vec![0u8; len];
                bitunshuffle(ts, &shuffled, &mut back, 5).unwrap();
                assert_eq!(back, data, "ts {ts} size {size}");
            }
        }
    }
}
