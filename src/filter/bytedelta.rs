//! Bytedelta (registered filter 35), decode direction.
//!
//! Applied after a byte shuffle: each of the `ts` byte streams (of
//! `len / ts` bytes) was replaced by its differences; decoding is a running
//! wrapping sum per stream. Trailing bytes that do not fill an element are
//! passed through.

use crate::error::{Error, Result};

pub fn decode(ts: usize, src: &[u8], dst: &mut [u8]) -> Result<()> {
    if ts == 0 {
        return Err(Error::corrupt("bytedelta with typesize 0"));
    }
    let stream = src.len() / ts;
    for s in 0..ts {
        let range = s * stream..(s + 1) * stream;
        let mut acc = 0u8;
        for (o, &i) in dst[range.clone()].iter_mut().zip(&src[range]) {
            acc = acc.wrapping_add(i);
            *o = acc;
        }
    }
    let done = stream * ts;
    dst[done..].copy_from_slice(&src[done..]);
    Ok(())
}
