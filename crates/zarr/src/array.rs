//! [`ZarrArray`]: an array's values in C order (optionally behind a
//! `.npy` header) read by byte range. A read fetches and decodes only the
//! chunks it touches (of a Blosc chunk, only the blocks it touches: see
//! [`crate::chunks`]), through the byte-bounded cache of the [`Env`] it is
//! given, gives unwritten chunks the fill value and cuts edge chunks to
//! the array's shape.

use crate::chunks::{Chunk, Chunks};
use crate::grid::{chunk_key, grid_shape, linear};
use crate::meta::{ArrayMeta, MAX_META_BYTES};
use crate::shard::Shards;
use crate::store::ChunkStore;
use crate::{Error, Result, ZARRAY, ZARR_JSON};
use blosc_decode::container::Env;
use blosc_decode::io::Source;
use std::sync::Arc;

/// The cache budget of an array opened without an [`Env`] of its own
/// (bytes of decoded chunks and blocks).
pub const CACHE_BYTES: u64 = 64 << 20;

pub struct ZarrArray {
    meta: ArrayMeta,
    store: Arc<dyn ChunkStore>,
    grid: Vec<u64>,
    header: Vec<u8>,
    chunks: Chunks,
    /// A sharded array's shards (the grid walked is the inner chunks').
    shards: Option<Shards>,
}

impl ZarrArray {
    /// The array whose directory `store` is: its `.zarray`, else its
    /// `zarr.json`; a cache of [`CACHE_BYTES`] of its own.
    pub fn open(store: Arc<dyn ChunkStore>) -> Result<ZarrArray> {
        ZarrArray::open_with(store, Env::new(CACHE_BYTES))
    }

    /// [`ZarrArray::open`], reading through `env`'s cache and counters.
    pub fn open_with(store: Arc<dyn ChunkStore>, env: Env) -> Result<ZarrArray> {
        let (text, v2) = match store.get(ZARRAY, MAX_META_BYTES)? {
            Some(t) => (t, true),
            None => match store.get(ZARR_JSON, MAX_META_BYTES)? {
                Some(t) => (t, false),
                None => return Err(Error::corrupt("neither .zarray nor zarr.json")),
            },
        };
        Ok(ZarrArray::with_env(
            ArrayMeta::parse(&text, v2)?,
            store,
            env,
        ))
    }

    /// The array `meta` describes, its chunks in `store`; a cache of
    /// [`CACHE_BYTES`] of its own.
    pub fn new(meta: ArrayMeta, store: Arc<dyn ChunkStore>) -> ZarrArray {
        ZarrArray::with_env(meta, store, Env::new(CACHE_BYTES))
    }

    /// [`ZarrArray::new`], reading through `env`'s cache (the daemon's
    /// one budget) and counting in its counters.
    pub fn with_env(meta: ArrayMeta, store: Arc<dyn ChunkStore>, env: Env) -> ZarrArray {
        let header = blosc_decode::npy::npy_header(&meta.dtype.descr, false, &meta.shape);
        ZarrArray {
            grid: grid_shape(&meta),
            header,
            chunks: Chunks::new(&meta, env),
            shards: meta.shard.clone().map(|s| Shards::new(s, meta.keys)),
            meta,
            store,
        }
    }

    /// What it reads through: the cache and the counters.
    pub fn env(&self) -> &Env {
        self.chunks.env()
    }

    /// Are its chunks read by Blosc block ([`crate::chunks::by_block`])?
    pub fn by_block(&self) -> bool {
        self.chunks.by_block()
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

    /// Chunks decoded whole so far (a chunk read by block counts its
    /// blocks in the [`Env`]'s `blocks_decoded`).
    pub fn decodes(&self) -> u64 {
        self.chunks.decodes()
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
        let chunk = self.chunk(&pos)?;
        let at = linear(&inner, &m.chunks) * s + r;
        if !chunk
            .copy(at, dst)
            .map_err(|e| in_key(e, &self.key(&pos)))?
        {
            for (i, x) in dst.iter_mut().enumerate() {
                *x = m.fill[((r + i as u64) % s) as usize];
            }
        }
        Ok(len)
    }

    /// How messages name the chunk at grid position `pos`: its key (for a
    /// sharded array, its shard's key and its place in the shard).
    fn key(&self, pos: &[u64]) -> String {
        match &self.shards {
            Some(s) => s.name(pos),
            None => chunk_key(self.meta.keys, pos),
        }
    }

    /// The chunk at grid position `pos` (remembered or cached). Its key is
    /// made only when the chunk is looked for in the store.
    fn chunk(&self, pos: &[u64]) -> Result<Chunk> {
        let id = linear(pos, &self.grid);
        if let Some(c) = self.chunks.known(id) {
            return Ok(c);
        }
        let key = self.key(pos);
        let src = match &self.shards {
            Some(s) => s.inner(self.store.as_ref(), pos),
            None => self.encoded(&key),
        };
        let found = match src {
            Ok(Some(src)) => self
                .chunks
                .load(&self.meta, id, src, &key)
                .map_err(|e| in_key(e, &key))?,
            Ok(None) => Chunk::Missing,
            Err(e) => return Err(in_key(e, &key)),
        };
        self.chunks.keep(id, &found);
        Ok(found)
    }

    /// The encoded bytes of the chunk stored at `key`, for positional
    /// reads; `None` for a chunk never written.
    fn encoded(&self, key: &str) -> Result<Option<Arc<dyn Source>>> {
        self.store.open(key, self.chunks.first(&self.meta))
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
    use blosc_decode::io::First;

    /// A store holding nothing.
    struct Empty;

    impl ChunkStore for Empty {
        fn open(&self, _key: &str, _first: First) -> Result<Option<Arc<dyn Source>>> {
            Ok(None)
        }
    }

    #[test]
    fn unwritten_chunks_read_as_the_fill_value() {
        let doc = br#"{"zarr_format": 2, "shape": [100], "chunks": [1],
          "dtype": "|u1", "order": "C", "fill_value": 3, "filters": null,
          "compressor": null}"#;
        let a = ZarrArray::new(ArrayMeta::parse(doc, true).unwrap(), Arc::new(Empty));
        let mut b = [0u8; 4];
        assert_eq!(a.read_values_at(98, &mut b).unwrap(), 2);
        assert_eq!(b[..2], [3, 3]);
    }
}
