//! Inner chunks of sharded arrays (v3 `sharding_indexed`). The grid an
//! array is read by is that of the inner chunks; an inner chunk's encoded
//! bytes are a window of its shard file, found through the shard's index.
//! Each shard's index is read once (one positional read) and kept with the
//! open shard file, at most [`INDEX_CACHE_BYTES`] of them, so an inner
//! chunk then costs one positional read of exactly its bytes. Every index
//! entry is checked against the shard file before it is used: an entry
//! that runs past the file or into the index makes that inner chunk's
//! reads fail, and no other's.

use crate::crc32c::crc32c;
use crate::grid::{chunk_key, linear};
use crate::meta::{KeyEncoding, ShardMeta};
use crate::store::ChunkStore;
use crate::{Error, Result};
use blosc_decode::io::{self, Source, Window};
use lru::LruCache;
use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Shard indexes kept per array, in bytes (at least one is kept).
pub const INDEX_CACHE_BYTES: u64 = 16 << 20;

/// Shards kept per array, at most (each holds its file open).
const MAX_KEPT: u64 = 64;

/// The entry of an inner chunk never written.
const MISSING: u64 = u64::MAX;

/// A shard's index, with the open shard file it describes; `None` for a
/// shard the store does not hold.
type Kept = Option<Arc<Index>>;

/// A shard file and its parsed index.
pub struct Index {
    src: Arc<dyn Source>,
    /// (offset, nbytes) of each inner chunk, C order.
    entries: Vec<(u64, u64)>,
    /// Where inner chunks may lie: the file without its index.
    data: (u64, u64),
}

impl Index {
    /// The index of a shard file `src` of an array laid out as `m`: read,
    /// its CRC checked, its entries not yet (see [`Index::entry`]).
    pub fn read(src: Arc<dyn Source>, m: &ShardMeta) -> Result<Index> {
        let n = m.index_bytes();
        let len = src.len();
        if len < n {
            return Err(Error::truncated(format!(
                "shard of {len} bytes, shorter than its {n}-byte index"
            )));
        }
        let (at, data) = match m.index_at_start {
            true => (0, (n, len)),
            false => (len - n, (0, len - n)),
        };
        let raw = io::read_vec(src.as_ref(), at, n)?;
        Ok(Index {
            entries: parse_index(&raw, m)?,
            src,
            data,
        })
    }

    /// Inner chunk `i`'s (offset, nbytes) in the shard file, `None` if it
    /// was never written; an error if it does not lie inside the file
    /// outside the index.
    pub fn entry(&self, i: u64) -> Result<Option<(u64, u64)>> {
        let (off, nb) = *self
            .entries
            .get(i as usize)
            .ok_or_else(|| Error::corrupt(format!("no index entry {i}")))?;
        if off == MISSING && nb == MISSING {
            return Ok(None);
        }
        let (lo, hi) = self.data;
        match off.checked_add(nb) {
            Some(end) if off >= lo && end <= hi => Ok(Some((off, nb))),
            _ => Err(Error::corrupt(format!(
                "index entry of {nb} bytes at {off} outside the shard's chunk bytes {lo}..{hi}"
            ))),
        }
    }
}

/// The (offset, nbytes) pairs of an index as stored (`raw`, exactly
/// [`ShardMeta::index_bytes`] long), its CRC-32C checked when it has one.
pub fn parse_index(raw: &[u8], m: &ShardMeta) -> Result<Vec<(u64, u64)>> {
    if raw.len() as u64 != m.index_bytes() {
        return Err(Error::corrupt(format!(
            "a shard index of {} bytes, expected {}",
            raw.len(),
            m.index_bytes()
        )));
    }
    let body = match m.index_crc {
        true => {
            let (body, tail) = raw.split_at(raw.len() - 4);
            let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
            let actual = crc32c(body);
            if stored != actual {
                return Err(Error::checksum(format!(
                    "shard index crc32c {actual:08x}, stored {stored:08x}"
                )));
            }
            body
        }
        false => raw,
    };
    let num = |b: &[u8]| {
        let a: [u8; 8] = b.try_into().unwrap_or_default();
        match m.index_big {
            true => u64::from_be_bytes(a),
            false => u64::from_le_bytes(a),
        }
    };
    Ok(body
        .chunks_exact(16)
        .map(|e| (num(&e[..8]), num(&e[8..])))
        .collect())
}

/// The shards of one array: where each inner chunk's bytes are.
pub struct Shards {
    meta: ShardMeta,
    keys: KeyEncoding,
    kept: Mutex<LruCache<String, Kept>>,
    index_reads: AtomicU64,
}

impl Shards {
    pub fn new(meta: ShardMeta, keys: KeyEncoding) -> Shards {
        let keep = (INDEX_CACHE_BYTES / meta.index_bytes().max(1)).clamp(1, MAX_KEPT);
        Shards {
            meta,
            keys,
            kept: Mutex::new(LruCache::new(
                NonZeroUsize::new(keep as usize).unwrap_or(NonZeroUsize::MIN),
            )),
            index_reads: AtomicU64::new(0),
        }
    }

    /// Shard indexes read so far.
    pub fn index_reads(&self) -> u64 {
        self.index_reads.load(Ordering::Relaxed)
    }

    /// The shard holding inner chunk `pos` (a position in the inner chunk
    /// grid), and the inner chunk's place in it (C order).
    fn locate(&self, pos: &[u64]) -> (Vec<u64>, u64) {
        let shard: Vec<u64> = pos.iter().zip(&self.meta.per).map(|(p, n)| p / n).collect();
        let inner: Vec<u64> = pos.iter().zip(&self.meta.per).map(|(p, n)| p % n).collect();
        (shard, linear(&inner, &self.meta.per))
    }

    /// How messages name inner chunk `pos`: its shard's key and its index.
    pub fn name(&self, pos: &[u64]) -> String {
        let (shard, i) = self.locate(pos);
        format!("{} inner chunk {i}", chunk_key(self.keys, &shard))
    }

    /// The encoded bytes of inner chunk `pos`, as a window of its shard
    /// file; `None` for one never written (or in a shard never written).
    pub fn inner(&self, store: &dyn ChunkStore, pos: &[u64]) -> Result<Option<Arc<dyn Source>>> {
        let (shard, i) = self.locate(pos);
        let key = chunk_key(self.keys, &shard);
        let Some(index) = self.index(store, &key)? else {
            return Ok(None);
        };
        let Some((off, nb)) = index.entry(i)? else {
            return Ok(None);
        };
        let path = index
            .src
            .path()
            .map(|p| p.to_path_buf())
            .unwrap_or_else(|| PathBuf::from(&key));
        let w = Window::new(index.src.clone(), off, nb, path)?;
        Ok(Some(Arc::new(w)))
    }

    /// The index of the shard stored at `key`, kept.
    fn index(&self, store: &dyn ChunkStore, key: &str) -> Result<Kept> {
        if let Some(k) = self.kept.lock().get(key) {
            return Ok(k.clone());
        }
        let kept = match store.open(key)? {
            Some(src) => {
                self.index_reads.fetch_add(1, Ordering::Relaxed);
                Some(Arc::new(Index::read(src, &self.meta)?))
            }
            None => None,
        };
        self.kept.lock().put(key.to_string(), kept.clone());
        Ok(kept)
    }
}
