//! Delta filter, decode direction.
//!
//! Block 0 of a chunk is a running XOR of its elements; every other block is
//! XORed element by element with the *decoded* block 0. Elements are
//! `typesize` wide for 1, 2, 4 and 8 (other sizes: 8 when a multiple of 8,
//! else bytes); trailing bytes that do not fill an element are left as they
//! are.
//!
//! A block shorter than one element (a chunk's last block, of fewer bytes
//! than the element width) has no element for C-Blosc2's encoder to write:
//! its output keeps whatever an earlier block left there (in a 227,417-byte
//! chunk of typesize 8 and blocks of 227,416 bytes that python-blosc2 4.4.5
//! and 4.14.1 wrote, the chunk's first byte in place of the last one). The
//! byte written is not in the file, so [`check_whole`] refuses such a block
//! rather than show a stale one. The trailing bytes of a block that holds
//! whole elements come out as written (the compatibility matrix checks
//! them against the data written, python-blosc2 2.0 to 4.8).
//!
//! The running XOR works on 64-bit words: a prefix XOR inside the word
//! (shifts by the element width and up), XORed with the broadcast of the
//! previous word's last element, which is itself carried as a running XOR
//! so that the loop's only dependency is one XOR per word.

/// A block of `len` bytes that holds no whole element but some bytes
/// (possible only as a chunk's last block) cannot be decoded: its bytes
/// were never encoded.
pub fn check_whole(ts: usize, len: usize) -> Result<(), String> {
    let w = elem_width(ts);
    if len == 0 || len >= w {
        return Ok(());
    }
    Err(format!(
        "delta filter: the block's {len} bytes are less than one {w}-byte item, which C-Blosc2's delta encoder does not store (the file holds stale bytes in their place); the bytes written cannot be recovered"
    ))
}

fn elem_width(ts: usize) -> usize {
    match ts {
        1 | 2 | 4 | 8 => ts,
        t if t % 8 == 0 => 8,
        _ => 1,
    }
}

/// Decode block 0 in place.
pub fn decode_ref(ts: usize, buf: &mut [u8]) {
    let w = elem_width(ts);
    let body = buf.len() / w * w;
    let buf = &mut buf[..body];
    // Broadcast of the last `w`-byte element of a little-endian word.
    let (ones, last) = match w {
        1 => (0x0101_0101_0101_0101u64, 56),
        2 => (0x0001_0001_0001_0001, 48),
        4 => (0x0000_0001_0000_0001, 32),
        _ => (1, 0),
    };
    let mut carry = 0u64;
    for c in buf.as_chunks_mut::<8>().0 {
        let mut x = u64::from_le_bytes(*c);
        if w <= 1 {
            x ^= x << 8;
        }
        if w <= 2 {
            x ^= x << 16;
        }
        if w <= 4 {
            x ^= x << 32;
        }
        *c = (x ^ carry).to_le_bytes();
        carry ^= (x >> last) * ones;
    }
    // Fewer than 8 bytes left (whole elements, as 8 is a multiple of w):
    // element by element against the already decoded bytes before them.
    let start = (body / 8 * 8).max(w);
    for i in start..body {
        buf[i] ^= buf[i - w];
    }
}

/// Scalar reference of `decode_ref` (the definition).
#[cfg(test)]
fn scalar_decode_ref(ts: usize, buf: &mut [u8]) {
    let w = elem_width(ts);
    let n = buf.len() / w;
    for i in 1..n {
        for k in 0..w {
            buf[i * w + k] ^= buf[(i - 1) * w + k];
        }
    }
}

/// Decode a non-reference block in place against decoded block 0 (`dref`).
pub fn decode_against(ts: usize, dref: &[u8], buf: &mut [u8]) {
    let w = elem_width(ts);
    let n = (buf.len() / w * w).min(dref.len() / w * w);
    // Byte-wise XOR: the compiler vectorises this loop.
    for (b, r) in buf[..n].iter_mut().zip(&dref[..n]) {
        *b ^= *r;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_ref_matches_definition() {
        let mut seed = 9u64;
        for ts in 0..=33usize {
            for len in (0..80usize).chain([255, 256, 1000, 4096 + 7]) {
                let data: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(3);
                        (seed >> 33) as u8
                    })
                    .collect();
                let mut a = data.clone();
                let mut b = data.clone();
                decode_ref(ts, &mut a);
                scalar_decode_ref(ts, &mut b);
                assert_eq!(a, b, "ts {ts} len {len}");
            }
        }
    }
}
