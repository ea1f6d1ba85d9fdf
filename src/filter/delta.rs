//! Delta filter, decode direction.
//!
//! Block 0 of a chunk is a running XOR of its elements; every other block is
//! XORed element by element with the *decoded* block 0. Elements are
//! `typesize` wide for 1, 2, 4 and 8 (other sizes: 8 when a multiple of 8,
//! else bytes); trailing bytes that do not fill an element are left as they
//! are.

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
    for (b, r) in buf[..n].iter_mut().zip(&dref[..n]) {
        *b ^= *r;
    }
}
