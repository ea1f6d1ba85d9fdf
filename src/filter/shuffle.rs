//! Byte (un)shuffle.

/// Undo a byte shuffle of `src` (typesize `ts`) into `dst` (same length).
/// The trailing `len % ts` bytes were not shuffled and are copied as they are.
pub fn unshuffle(ts: usize, src: &[u8], dst: &mut [u8]) {
    debug_assert_eq!(src.len(), dst.len());
    let n = src.len() / ts.max(1);
    if ts <= 1 || n == 0 {
        dst.copy_from_slice(src);
        return;
    }
    for j in 0..ts {
        let stream = &src[j * n..(j + 1) * n];
        for (i, &b) in stream.iter().enumerate() {
            dst[i * ts + j] = b;
        }
    }
    let tail = n * ts;
    dst[tail..].copy_from_slice(&src[tail..]);
}
