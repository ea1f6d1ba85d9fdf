//! What a python-blosc2 cache of a remote or local array says it holds.
//!
//! A `Proxy` keeps the chunks it has read from its source in a frame of the
//! source's geometry (an NDArray or an SChunk) whose fixed metalayer
//! `proxy-source` says where the source is; a `RemoteArray` saved with its
//! cache is the same, marked by a `b2o` metalayer of kind `remote_array`.
//! Chunks not fetched yet are special chunks that read as zeros (or
//! uninitialized), so only the vlmetalayers tell them from data:
//!
//! - `proxy-fetched`: one bit a chunk, chunk `n` at bit `n % 8` of byte
//!   `n / 8`, `ceil(nchunks / 8)` bytes (msgpack bin);
//! - `proxy-fetched-blocks` with `proxy-fetched-bpc` (blocks per chunk): the
//!   same, one bit a block, block `b` of chunk `n` at bit `n * bpc + b`, for
//!   sources that serve single blocks; a chunk may hold some blocks only;
//! - neither (caches written before the bitmap, python-blosc2 2.x): every
//!   stored chunk was fetched, every special one was not;
//! - `proxy-dirty`: a writer stopped partway; python-blosc2 then forgets
//!   every bitmap, and so nothing counts as fetched.

use crate::format::msgpack::{Reader, Val};

/// The fixed metalayer every proxy cache carries.
pub const SOURCE_META: &str = "proxy-source";

/// The most blocks a chunk can have (C-Blosc2 chunks are under 2 GiB and
/// blocks at least one byte; a bitmap claiming more lies).
const MAX_BPC: i128 = 1 << 31;

/// Which chunks (or blocks) a cache holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// A bitmap of `nchunks * bpc` bits (`bpc` 1: one bit a chunk).
    Bits {
        /// Blocks a chunk (1: the bitmap counts whole chunks).
        bpc: u64,
        /// The bitmap, exactly `ceil(nchunks * bpc / 8)` bytes.
        bits: Vec<u8>,
    },
    /// No bitmap: the stored chunks are the fetched ones.
    Stored,
    /// Nothing counts as fetched (`proxy-dirty`).
    Nothing,
}

impl Fetched {
    /// Is block `b` of chunk `n` fetched, by the bitmap (`None`: no bitmap,
    /// the chunk table decides)? `b` past `bpc` is not.
    pub fn block(&self, n: u64, b: u64) -> Option<bool> {
        match self {
            Fetched::Bits { bpc, bits } => {
                if b >= *bpc {
                    return Some(false);
                }
                let bit = n.checked_mul(*bpc).and_then(|x| x.checked_add(b));
                Some(bit.is_some_and(|i| {
                    let byte = usize::try_from(i / 8).ok().and_then(|k| bits.get(k));
                    byte.is_some_and(|&v| v >> (i % 8) & 1 == 1)
                }))
            }
            Fetched::Stored => None,
            Fetched::Nothing => Some(false),
        }
    }

    /// Is every block of chunk `n` fetched (`None`: the chunk table decides)?
    pub fn chunk(&self, n: u64) -> Option<bool> {
        match self {
            Fetched::Bits { bpc, .. } => Some((0..*bpc).all(|b| self.block(n, b) == Some(true))),
            other => other.block(n, 0),
        }
    }

    /// Blocks a chunk, as the bitmap counts them (1 without a block bitmap).
    pub fn bpc(&self) -> u64 {
        match self {
            Fetched::Bits { bpc, .. } => *bpc,
            _ => 1,
        }
    }
}

/// Is a frame with these fixed metalayers a cache of another array (and
/// what kind: `"proxy cache"` or `"RemoteArray cache"`)?
pub fn cache_kind(metalayers: &[(String, Vec<u8>)]) -> Option<&'static str> {
    for (name, value) in metalayers {
        if name == SOURCE_META {
            return Some("proxy cache");
        }
        if name == "b2o" && map_str(value, "kind").as_deref() == Some("remote_array") {
            return Some("RemoteArray cache");
        }
    }
    None
}

/// The text value of `key` in the msgpack map `value`, if it is one.
pub fn map_str(value: &[u8], key: &str) -> Option<String> {
    match Reader::new(value).read() {
        Ok(Val::Map(m)) => m
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .and_then(|(_, v)| v.as_str().map(str::to_string)),
        _ => None,
    }
}

/// What the vlmetalayers of a cache of `nchunks` chunks say it holds. A
/// bitmap whose length does not fit `nchunks` (or that is not bytes), or
/// a block count that is not a positive size, is an error.
pub fn fetched(vlmeta: &[(String, Vec<u8>)], nchunks: u64) -> Result<Fetched, String> {
    let get = |name: &str| vlmeta.iter().find(|(n, _)| n == name).map(|(_, v)| &v[..]);
    if get("proxy-dirty").is_some() {
        return Ok(Fetched::Nothing);
    }
    if let Some(bits) = get("proxy-fetched-blocks") {
        let bpc =
            get("proxy-fetched-bpc").ok_or("proxy-fetched-blocks without proxy-fetched-bpc")?;
        let bpc = match Reader::new(bpc).read() {
            Ok(Val::Int(n)) if (1..=MAX_BPC).contains(&n) => n as u64,
            _ => return Err("proxy-fetched-bpc is not a count of blocks".into()),
        };
        return bitmap("proxy-fetched-blocks", bits, nchunks, bpc);
    }
    match get("proxy-fetched") {
        Some(bits) => bitmap("proxy-fetched", bits, nchunks, 1),
        None => Ok(Fetched::Stored),
    }
}

/// The msgpack bin `value` as a bitmap of `nchunks * bpc` bits.
fn bitmap(name: &str, value: &[u8], nchunks: u64, bpc: u64) -> Result<Fetched, String> {
    let bits = match Reader::new(value).read() {
        Ok(Val::Bin(b)) => b,
        _ => return Err(format!("{name} is not a byte string")),
    };
    let want = nchunks
        .checked_mul(bpc)
        .map(|n| n.div_ceil(8))
        .ok_or_else(|| format!("{name}: {nchunks} chunks of {bpc} blocks overflow"))?;
    if bits.len() as u64 != want {
        return Err(format!(
            "{name} holds {} bytes, but {nchunks} chunks of {bpc} block(s) need {want}",
            bits.len()
        ));
    }
    Ok(Fetched::Bits {
        bpc,
        bits: bits.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin(b: &[u8]) -> Vec<u8> {
        let mut v = vec![0xc4, b.len() as u8];
        v.extend_from_slice(b);
        v
    }

    fn meta(pairs: &[(&str, Vec<u8>)]) -> Vec<(String, Vec<u8>)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn chunk_bitmap_little_bit_first() {
        let f = fetched(&meta(&[("proxy-fetched", bin(&[0b101, 1]))]), 10).unwrap();
        let got: Vec<bool> = (0..10).map(|n| f.chunk(n).unwrap()).collect();
        let mut want = vec![false; 10];
        want[0] = true;
        want[2] = true;
        want[8] = true;
        assert_eq!(got, want);
        assert_eq!(f.chunk(1 << 40), Some(false));
    }

    #[test]
    fn block_bitmap_needs_every_block_for_a_chunk() {
        let v = meta(&[
            ("proxy-fetched-blocks", bin(&[0b1111_1101])),
            ("proxy-fetched-bpc", vec![4]),
        ]);
        let f = fetched(&v, 2).unwrap();
        assert_eq!(f.bpc(), 4);
        assert_eq!(f.chunk(0), Some(false));
        assert_eq!(f.block(0, 0), Some(true));
        assert_eq!(f.block(0, 1), Some(false));
        assert_eq!(f.chunk(1), Some(true));
        assert_eq!(f.block(1, 4), Some(false));
    }

    #[test]
    fn lying_bitmaps_are_errors() {
        let short = meta(&[("proxy-fetched", bin(&[1]))]);
        assert!(fetched(&short, 9).unwrap_err().contains("holds 1 bytes"));
        let text = meta(&[("proxy-fetched", vec![0xa1, b'x'])]);
        assert!(fetched(&text, 1).is_err());
        let huge = meta(&[
            ("proxy-fetched-blocks", bin(&[1])),
            ("proxy-fetched-bpc", vec![0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0]),
        ]);
        assert!(fetched(&huge, u64::MAX).is_err());
        let nobpc = meta(&[("proxy-fetched-blocks", bin(&[1]))]);
        assert!(fetched(&nobpc, 1).is_err());
    }

    #[test]
    fn no_bitmap_and_dirty() {
        assert_eq!(fetched(&[], 3).unwrap(), Fetched::Stored);
        let dirty = meta(&[("proxy-dirty", vec![0x80]), ("proxy-fetched", bin(&[1]))]);
        assert_eq!(fetched(&dirty, 1).unwrap().chunk(0), Some(false));
    }
}
