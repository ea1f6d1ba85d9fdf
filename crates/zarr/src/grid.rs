//! The regular chunk grid: which chunk holds an element, and its key.

use crate::meta::{ArrayMeta, KeyEncoding};

/// The number of chunks along each dimension (a dimension of length 0
/// has none).
pub fn grid_shape(meta: &ArrayMeta) -> Vec<u64> {
    meta.shape
        .iter()
        .zip(&meta.chunks)
        .map(|(&s, &c)| s.div_ceil(c))
        .collect()
}

/// The key of the chunk at grid position `pos`.
pub fn chunk_key(keys: KeyEncoding, pos: &[u64]) -> String {
    let sep = keys.sep as char;
    let mut k = String::new();
    if keys.prefix {
        k.push('c');
    }
    for (i, p) in pos.iter().enumerate() {
        if i > 0 || keys.prefix {
            k.push(sep);
        }
        k.push_str(&p.to_string());
    }
    if pos.is_empty() && !keys.prefix {
        k.push('0');
    }
    k
}

/// `pos` as one number, C order over `grid` (for cache keys).
pub fn linear(pos: &[u64], grid: &[u64]) -> u64 {
    pos.iter()
        .zip(grid)
        .fold(0u64, |a, (&p, &g)| a.wrapping_mul(g).wrapping_add(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_each_encoding() {
        let v2 = KeyEncoding {
            prefix: false,
            sep: b'.',
        };
        let v2n = KeyEncoding {
            prefix: false,
            sep: b'/',
        };
        let v3 = KeyEncoding {
            prefix: true,
            sep: b'/',
        };
        assert_eq!(chunk_key(v2, &[1, 2]), "1.2");
        assert_eq!(chunk_key(v2n, &[1, 2]), "1/2");
        assert_eq!(chunk_key(v3, &[1, 2]), "c/1/2");
        assert_eq!(chunk_key(v2, &[]), "0");
        assert_eq!(chunk_key(v3, &[]), "c");
        assert_eq!(linear(&[1, 2], &[3, 4]), 6);
    }
}
