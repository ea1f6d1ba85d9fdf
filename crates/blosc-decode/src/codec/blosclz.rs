//! BloscLZ decoder.
//!
//! BloscLZ is a FastLZ-derived LZ77 format. A stream is a sequence of
//! instructions, each starting with a control byte `ctrl`:
//! - `ctrl < 32`: a literal run of `ctrl + 1` bytes follows.
//! - otherwise a match: length code `(ctrl >> 5) - 1` (7 means "extended":
//!   further bytes are added while they are 255), then a distance byte; the
//!   distance is `((ctrl & 31) << 8) + byte + 1`, or, when both parts are
//!   all ones, `8192 +` a 16-bit big-endian distance that follows. The copy
//!   has LZ77 semantics (it may overlap its own output).
//!
//! The first byte's top three bits carry the format level and are ignored;
//! the first instruction is always a literal. A stream ends after an
//! instruction that consumes the last input byte (the reference decoder
//! drops a match that ends the input, and so do we).

use crate::error::{Error, Result};

const MAX_DISTANCE: usize = 8191;

fn bad(what: &str) -> Error {
    Error::corrupt(format!("blosclz stream: {what}"))
}

/// Decompress one BloscLZ stream into `dst`, returning the bytes written.
/// Never writes past `dst` and never panics, whatever `src` holds.
pub fn decompress(src: &[u8], dst: &mut [u8]) -> Result<usize> {
    let n = src.len();
    let maxout = dst.len();
    if n == 0 {
        return Ok(0);
    }
    let mut ip = 1usize;
    let mut op = 0usize;
    let mut ctrl = (src[0] & 31) as usize;
    loop {
        if ctrl >= 32 {
            let mut len = (ctrl >> 5) - 1;
            let ofs = (ctrl & 31) << 8;
            if len == 6 {
                loop {
                    if ip + 1 >= n {
                        return Err(bad("truncated match length"));
                    }
                    let code = src[ip];
                    ip += 1;
                    len += code as usize;
                    if code != 255 {
                        break;
                    }
                }
            } else if ip + 1 >= n {
                return Err(bad("truncated match"));
            }
            let code = src[ip] as usize;
            ip += 1;
            len += 3;
            let mut dist = ofs + code + 1;
            if code == 255 && ofs == 31 << 8 {
                if ip + 1 >= n {
                    return Err(bad("truncated far match distance"));
                }
                let far = ((src[ip] as usize) << 8) | src[ip + 1] as usize;
                ip += 2;
                dist = far + MAX_DISTANCE + 1;
            }
            if len > maxout - op {
                return Err(bad("match runs past the end of the block"));
            }
            if dist > op {
                return Err(bad("match reaches before the start of the block"));
            }
            if ip >= n {
                break;
            }
            ctrl = src[ip] as usize;
            ip += 1;
            copy_match(dst, op, dist, len);
            op += len;
        } else {
            let run = ctrl + 1;
            if run > maxout - op {
                return Err(bad("literal run past the end of the block"));
            }
            if run > n - ip {
                return Err(bad("literal run past the end of the stream"));
            }
            dst[op..op + run].copy_from_slice(&src[ip..ip + run]);
            op += run;
            ip += run;
            if ip >= n {
                break;
            }
            ctrl = src[ip] as usize;
            ip += 1;
        }
    }
    Ok(op)
}

/// Copy `len` bytes from `op - dist` to `op` with LZ77 (overlapping) semantics.
/// Callers guarantee `dist <= op` and `op + len <= dst.len()`.
#[inline]
fn copy_match(dst: &mut [u8], op: usize, dist: usize, len: usize) {
    let from = op - dist;
    if dist == 1 {
        let b = dst[from];
        dst[op..op + len].fill(b);
    } else if dist >= len {
        dst.copy_within(from..from + len, op);
    } else {
        // The source is periodic with period `dist`: copy in doubling chunks
        // from the start of the pattern, keeping `done` a multiple of `dist`.
        let mut done = 0usize;
        while done < len {
            let c = (dist + done).min(len - done);
            dst.copy_within(from..from + c, op + done);
            done += c;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_then_run() {
        // literal "ab" (ctrl 1); match ctrl 0x40: length (2 - 1) + 3 = 4,
        // distance byte 1 -> distance 2 (overlapping copy); literal "z".
        let src = [0x01, b'a', b'b', 0x40, 0x01, 0x00, b'z'];
        let mut out = [0u8; 7];
        let n = decompress(&src, &mut out).unwrap();
        assert_eq!(&out[..n], b"abababz");
    }

    #[test]
    fn rejects_match_before_start() {
        let src = [0x00, b'a', 0x40, 0x05, 0x00, b'z'];
        let mut out = [0u8; 16];
        assert!(decompress(&src, &mut out).is_err());
    }

    #[test]
    fn never_panics_on_garbage() {
        let mut seed = 0x1234_5678_u64;
        for len in 0..200 {
            let src: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            for out_len in [0, 1, 7, 64, 1000] {
                let mut out = vec![0u8; out_len];
                let _ = decompress(&src, &mut out);
            }
        }
    }
}
