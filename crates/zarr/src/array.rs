//! [`ZarrArray`]: an array's values in C order (optionally behind a
//! `.npy` header) read by byte range. A read fetches and decodes only the
//! chunks it touches, keeps the last decoded chunks (at most
//! [`CACHE_BYTES`]), gives unwritten chunks the fill value and cuts edge
//! chunks to the array's shape.

use crate::codec::decode_chunk;
use crate::grid::{chunk_key, grid_shape, linear};
use crate::meta::{ArrayMeta, MAX_META_BYTES};
use crate::shard::Shards;
use crate::store::{read_bounded, ChunkStore};
use crate::{Error, Result, ZARRAY, ZARR_JSON};
use blosc_decode::io::Source;
use lru::LruCache;
use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Decoded chunks kept per array, in bytes (at least one chunk is kept).
pub const CACHE_BYTES: u64 = 64 << 20;

/// Decoded chunks kept per array, at most (the cache's map is sized by
/// it when made).
const MAX_CACHED: u64 = 1024;

/// A decoded chunk, or `None` for one the store does not hold.
type Decoded = Option<Arc<Vec<u8>>>;

pub struct ZarrArray {
    meta: ArrayMeta,
    store: Arc<dyn ChunkStore>,
    grid: Vec<u64>,
    header: Vec<u8>,
    cache: Mutex<LruCache<u64, Decoded>>,
    decodes: AtomicU64,
    /// A sharded array's shards (the grid walked is the inner chunks').
    shards: Option<Shards>,
}

impl ZarrArray {
    /// The array whose directory `store` is: its `.zarray`, else its
    /// `zarr.json`.
    pub fn open(store: Arc<dyn ChunkStore>) -> Result<ZarrArray> {
        let (text, v2) = match store.get(ZARRAY, MAX_META_BYTES)? {
            Some(t) => (t, true),
            None => match store.get(ZARR_JSON, MAX_META_BYTES)? {
                Some(t) => (t, false),
                None => return Err(Error::corrupt("neither .zarray nor zarr.json")),
            },
        };
        Ok(ZarrArray::new(ArrayMeta::parse(&text, v2)?, store))
    }

    pub fn new(meta: ArrayMeta, store: Arc<dyn ChunkStore>) -> ZarrArray {
        let header = blosc_decode::npy::npy_header(&meta.dtype.descr, false, &meta.shape);
        let keep = (CACHE_BYTES / meta.chunk_bytes().max(1)).clamp(1, MAX_CACHED);
        ZarrArray {
            grid: grid_shape(&meta),
            header,
            cache: Mutex::new(LruCache::new(
                NonZeroUsize::new(keep as usize).unwrap_or(NonZeroUsize::MIN),
            )),
            decodes: AtomicU64::new(0),
            shards: meta.shard.clone().map(|s| Shards::new(s, meta.keys)),
            meta,
            store,
        }
    }

    pub fn meta(&self) -> &ArrayMeta {
        &self.meta
    }

    /// The `.npy` header `numpy.save` writes for the values.
    pub fn npy_header(&self) -> &[u8] {
        &self.header
    }

    /// Bytes of the `.npy` file: header and values.
    pub fn npy_len(&self) -> u64 {
        self.header.len() as u64 + self.meta.data_bytes()
    }

    /// Chunks decoded so far.
    pub fn decodes(&self) -> u64 {
        self.decodes.load(Ordering::Relaxed)
    }

    /// Shard indexes read so far (0 for an array without shards).
    pub fn index_reads(&self) -> u64 {
        self.shards.as_ref().map_or(0, Shards::index_reads)
    }

    /// Read the `.npy` file's bytes at `off` into `buf`; fewer at its end.
    pub fn read_npy_at(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        let h = self.header.len() as u64;
        let mut done = 0;
        if off < h {
            let n = ((h - off) as usize).min(buf.len());
            buf[..n].copy_from_slice(&self.header[off as usize..off as usize + n]);
            done = n;
        }
        let at = off.max(h) - h;
        Ok(done + self.read_values_at(at, &mut buf[done..])?)
    }

    /// Read the C-order values' bytes at `off` into `buf`; fewer at their
    /// end.
    pub fn read_values_at(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        let total = self.meta.data_bytes();
        if off >= total {
            return Ok(0);
        }
        let n = (total - off).min(buf.len() as u64);
        let mut b = off;
        while b < off + n {
            let len = self.read_run(b, off + n, &mut buf[(b - off) as usize..])?;
            b += len;
        }
        Ok(n as usize)
    }

    /// Copy the bytes from `b` that one chunk holds contiguously (up to
    /// the end of its row, or `end`) to the start of `dst`; returns how
    /// many.
    fn read_run(&self, b: u64, end: u64, dst: &mut [u8]) -> Result<u64> {
        let m = &self.meta;
        let s = m.dtype.size;
        let (e, r) = (b / s, b % s);
        let nd = m.shape.len();
        let mut idx = vec![0u64; nd];
        let mut rest = e;
        for d in (0..nd).rev() {
            idx[d] = rest % m.shape[d];
            rest /= m.shape[d];
        }
        let pos: Vec<u64> = idx.iter().zip(&m.chunks).map(|(i, c)| i / c).collect();
        let inner: Vec<u64> = idx.iter().zip(&m.chunks).map(|(i, c)| i % c).collect();
        let run = match nd {
            0 => 1,
            _ => (m.chunks[nd - 1] - inner[nd - 1]).min(m.shape[nd - 1] - idx[nd - 1]),
        };
        let len = ((e + run) * s).min(end) - b;
        let dst = &mut dst[..len as usize];
        match self.chunk(&pos)? {
            Some(c) => {
                let at = (linear(&inner, &m.chunks) * s + r) as usize;
                let src = c
                    .get(at..at + len as usize)
                    .ok_or_else(|| Error::corrupt("chunk shorter than its shape"))?;
                dst.copy_from_slice(src);
            }
            None => {
                for (i, x) in dst.iter_mut().enumerate() {
                    *x = m.fill[((r + i as u64) % s) as usize];
                }
            }
        }
        Ok(len)
    }

    /// The decoded chunk at grid position `pos` (cached).
    fn chunk(&self, pos: &[u64]) -> Result<Decoded> {
        let id = linear(pos, &self.grid);
        if let Some(c) = self.cache.lock().get(&id) {
            return Ok(c.clone());
        }
        let (key, src) = match &self.shards {
            Some(s) => (s.name(pos), s.inner(self.store.as_ref(), pos)),
            None => {
                let key = chunk_key(self.meta.keys, pos);
                let src = self.encoded(&key);
                (key, src)
            }
        };
        let found = match src {
            Ok(Some(src)) => {
                let chunk = self.meta.stored_bytes();
                let max = chunk.saturating_mul(2).saturating_add(1 << 16);
                let raw = read_bounded(src.as_ref(), max, &key).map_err(|e| in_key(e, &key))?;
                self.decodes.fetch_add(1, Ordering::Relaxed);
                let v = decode_chunk(&self.meta, raw).map_err(|e| in_key(e, &key))?;
                Some(Arc::new(v))
            }
            Ok(None) => None,
            Err(e) => return Err(in_key(e, &key)),
        };
        self.cache.lock().put(id, found.clone());
        Ok(found)
    }

    /// The encoded bytes of the chunk stored at `key`, for positional
    /// reads; `None` for a chunk never written.
    fn encoded(&self, key: &str) -> Result<Option<Arc<dyn Source>>> {
        self.store.open(key)
    }
}

/// `e` with the chunk key it happened at.
fn in_key(mut e: Error, key: &str) -> Error {
    e.reason = format!("chunk {key}: {}", e.reason);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store holding nothing.
    struct Empty;

    impl ChunkStore for Empty {
        fn open(&self, _key: &str) -> Result<Option<Arc<dyn Source>>> {
            Ok(None)
        }
    }

    #[test]
    fn tiny_chunks_do_not_size_a_huge_cache() {
        let doc = br#"{"zarr_format": 2, "shape": [100], "chunks": [1],
          "dtype": "|u1", "order": "C", "fill_value": 3, "filters": null,
          "compressor": null}"#;
        let a = ZarrArray::new(ArrayMeta::parse(doc, true).unwrap(), Arc::new(Empty));
        // The map behind the cache is made with room for every entry.
        assert_eq!(a.cache.lock().cap().get() as u64, MAX_CACHED);
        let mut b = [0u8; 4];
        assert_eq!(a.read_values_at(98, &mut b).unwrap(), 2);
        assert_eq!(b[..2], [3, 3]);
    }
}
