//! Inner chunks of sharded arrays (v3 `sharding_indexed`). The grid an
//! array is read by is that of the inner chunks; an inner chunk's encoded
//! bytes are a window of its shard file, found through the shard's index.
//! Each shard's index is read once (one positional read) and kept with the
//! open shard file, at most [`INDEX_CACHE_BYTES`] of them, so an inner
//! chunk then costs one positional read of exactly its bytes. Every index
//! entry is checked against the shard file before it is used: an entry
//! that runs past the file or into the index makes that inner chunk's
//! reads fail, and no other's.
//!
//! With nested sharding, the grid is that of the innermost chunks; the
//! window an index gives is a shard of the next level, whose own index is
//! read from the end (or start) of that window and kept the same way, per
//! level.

use crate::crc32c::crc32c;
use crate::grid::{chunk_key, linear};
use crate::meta::{KeyEncoding, ShardMeta};
use crate::store::ChunkStore;
use crate::{Error, Result};
use blosc_decode::io::{self, First, Source, Window};
use lru::LruCache;
use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
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

    /// Inner chunk `i`'s bytes as a window of the shard file (named
    /// `path`), `None` if it was never written.
    fn window(&self, i: u64, path: &Path) -> Result<Option<Arc<dyn Source>>> {
        let Some((off, nb)) = self.entry(i)? else {
            return Ok(None);
        };
        let w = Window::new(self.src.clone(), off, nb, path.to_path_buf())?;
        Ok(Some(Arc::new(w)))
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
    /// Innermost chunks per outermost shard, along each dimension.
    per: Vec<u64>,
    /// Indexes kept, per level (outermost first), each level's bounded by
    /// [`INDEX_CACHE_BYTES`]: by shard key, then (nested) the inner shard's
    /// place in each level above.
    kept: Vec<Mutex<LruCache<String, Kept>>>,
    index_reads: AtomicU64,
}

impl Shards {
    pub fn new(meta: ShardMeta, keys: KeyEncoding) -> Shards {
        let kept = meta
            .levels()
            .map(|m| {
                let keep = (INDEX_CACHE_BYTES / m.index_bytes().max(1)).clamp(1, MAX_KEPT);
                Mutex::new(LruCache::new(
                    NonZeroUsize::new(keep as usize).unwrap_or(NonZeroUsize::MIN),
                ))
            })
            .collect();
        Shards {
            per: meta.innermost_per(),
            meta,
            keys,
            kept,
            index_reads: AtomicU64::new(0),
        }
    }

    /// Shard indexes read so far.
    pub fn index_reads(&self) -> u64 {
        self.index_reads.load(Ordering::Relaxed)
    }

    /// The shard holding inner chunk `pos` (a position in the innermost
    /// chunk grid), and the inner chunk's place (C order) in each level,
    /// outermost first.
    fn locate(&self, pos: &[u64]) -> (Vec<u64>, Vec<u64>) {
        let shard: Vec<u64> = pos.iter().zip(&self.per).map(|(p, n)| p / n).collect();
        let mut rem: Vec<u64> = pos.iter().zip(&self.per).map(|(p, n)| p % n).collect();
        let mut below = self.per.clone();
        let places = self
            .meta
            .levels()
            .map(|m| {
                // `below`: innermost chunks per inner chunk of this level.
                for (b, n) in below.iter_mut().zip(&m.per) {
                    *b /= n;
                }
                let at: Vec<u64> = rem.iter().zip(&below).map(|(r, b)| r / b).collect();
                for (r, b) in rem.iter_mut().zip(&below) {
                    *r %= b;
                }
                linear(&at, &m.per)
            })
            .collect();
        (shard, places)
    }

    /// How messages name inner chunk `pos`: its shard's key and its index
    /// (with nested shards, its index in each level).
    pub fn name(&self, pos: &[u64]) -> String {
        let (shard, places) = self.locate(pos);
        let places: Vec<String> = places.iter().map(u64::to_string).collect();
        format!(
            "{} inner chunk {}",
            chunk_key(self.keys, &shard),
            places.join("/")
        )
    }

    /// The encoded bytes of inner chunk `pos`, as a window of its shard
    /// file; `None` for one never written (or in a shard never written).
    pub fn inner(&self, store: &dyn ChunkStore, pos: &[u64]) -> Result<Option<Arc<dyn Source>>> {
        let (shard, places) = self.locate(pos);
        let mut key = chunk_key(self.keys, &shard);
        let n = self.meta.index_bytes();
        let first = match self.meta.index_at_start {
            true => First::Head(n),
            false => First::Tail(n),
        };
        let outer = self.kept(0, &key, || match store.open(&key, first)? {
            Some(src) => self.read_index(src, &self.meta).map(Some),
            None => Ok(None),
        })?;
        let Some(mut index) = outer else {
            return Ok(None);
        };
        let path = index
            .src
            .path()
            .map(|p| p.to_path_buf())
            .unwrap_or_else(|| PathBuf::from(&key));
        // Each level but the last gives the window of a shard of the next
        // (`places` holds one per level: never empty).
        let (last, above) = places.split_last().unwrap_or((&0, &[]));
        for (level, (&i, m)) in above.iter().zip(self.meta.levels().skip(1)).enumerate() {
            let Some(w) = index.window(i, &path)? else {
                return Ok(None);
            };
            key = format!("{key}#{i}");
            let Some(ix) = self.kept(level + 1, &key, || self.read_index(w, m).map(Some))? else {
                return Ok(None);
            };
            index = ix;
        }
        index.window(*last, &path)
    }

    /// The index kept at `level` under `key`, else `load`ed and kept.
    fn kept(&self, level: usize, key: &str, load: impl FnOnce() -> Result<Kept>) -> Result<Kept> {
        if let Some(k) = self.kept[level].lock().get(key) {
            return Ok(k.clone());
        }
        let k = load()?;
        self.kept[level].lock().put(key.to_string(), k.clone());
        Ok(k)
    }

    /// The index of the shard `src` (laid out as `m`), counted.
    fn read_index(&self, src: Arc<dyn Source>, m: &ShardMeta) -> Result<Arc<Index>> {
        self.index_reads.fetch_add(1, Ordering::Relaxed);
        Index::read(src, m).map(Arc::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DirStore, ZarrArray};
    use std::path::Path;

    /// A directory whose sources count the reads made of them, and bytes.
    struct Counted {
        dir: DirStore,
        reads: Arc<AtomicU64>,
        bytes: Arc<AtomicU64>,
    }

    struct CountedSource {
        inner: Arc<dyn Source>,
        reads: Arc<AtomicU64>,
        bytes: Arc<AtomicU64>,
    }

    impl Source for CountedSource {
        fn len(&self) -> u64 {
            self.inner.len()
        }
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
            self.inner.read_exact_at(offset, buf)
        }
    }

    impl ChunkStore for Counted {
        fn open(&self, key: &str, first: First) -> Result<Option<Arc<dyn Source>>> {
            Ok(self.dir.open(key, first)?.map(|inner| {
                Arc::new(CountedSource {
                    inner,
                    reads: self.reads.clone(),
                    bytes: self.bytes.clone(),
                }) as Arc<dyn Source>
            }))
        }
    }

    /// Array `name` of the fixtures' `sharded.zarr`: its directory, and a
    /// store over it that counts reads.
    fn counted(name: &str) -> (PathBuf, Arc<Counted>) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/zarr/z3-3.1.6/stores/sharded.zarr")
            .join(name);
        let store = Arc::new(Counted {
            dir: DirStore::new(&dir),
            reads: Arc::default(),
            bytes: Arc::default(),
        });
        (dir, store)
    }

    /// `wide` of the fixtures: 65536 uint32, 2 shards of 8 inner chunks of
    /// 16 KiB, the index (8 entries and a crc32c) at the end.
    #[test]
    fn a_small_read_reads_the_index_once_then_only_its_inner_chunk() {
        let (dir, store) = counted("wide");
        let a = ZarrArray::open(store.clone()).unwrap();
        let (reads, bytes) = (store.reads.clone(), store.bytes.clone());
        let shard = std::fs::read(dir.join("c/1")).unwrap();
        let index = &shard[shard.len() - 132..];
        let entry = |i: usize| {
            let e = &index[16 * i..16 * i + 16];
            u64::from_le_bytes(e[8..].try_into().unwrap())
        };
        let mut buf = vec![0u8; 4096];
        let before = (reads.load(Ordering::Relaxed), bytes.load(Ordering::Relaxed));
        // Inner chunk 3 of shard 1: its index, then its bytes.
        a.read_values_at((8 + 3) * 16384 + 4096, &mut buf).unwrap();
        assert_eq!(reads.load(Ordering::Relaxed) - before.0, 2);
        assert_eq!(
            bytes.load(Ordering::Relaxed) - before.1,
            132 + entry(3),
            "the index and one inner chunk"
        );
        // Inner chunk 6 of the same shard: its bytes alone.
        let before = (reads.load(Ordering::Relaxed), bytes.load(Ordering::Relaxed));
        a.read_values_at((8 + 6) * 16384, &mut buf).unwrap();
        assert_eq!(reads.load(Ordering::Relaxed) - before.0, 1);
        assert_eq!(bytes.load(Ordering::Relaxed) - before.1, entry(6));
        assert_eq!((a.index_reads(), a.decodes()), (1, 2));
    }

    /// `nested` of the fixtures: 13x10 uint16 in shards of 8x8 (index at
    /// the start) of shards of 4x4 (index at the end) of 2x2 chunks.
    #[test]
    fn a_read_in_a_nested_shard_reads_each_level_s_index_once() {
        let (_, store) = counted("nested");
        let a = ZarrArray::open(store.clone()).unwrap();
        let reads = || store.reads.load(Ordering::Relaxed);
        let mut buf = [0u8; 2];
        let mut at = |row: u64, col: u64| {
            let before = reads();
            a.read_values_at((row * 10 + col) * 2, &mut buf).unwrap();
            (u16::from_le_bytes(buf), reads() - before, a.index_reads())
        };
        // Element (0, 1): the outer index, the inner shard's, the chunk
        // (a Blosc chunk: its reads are `chunk`, counted next).
        let (v, first, ixs) = at(0, 1);
        // Another chunk of that inner shard: its chunk's reads alone.
        let (w, chunk, same) = at(1, 2);
        assert_eq!((v, w, ixs, same), (3, 24, 2, 2));
        assert_eq!(first, 2 + chunk);
        // Another inner shard of that shard: its index, then the chunk.
        assert_eq!(at(2, 5), (51, 1 + chunk, 3));
        // An inner shard never written: fill values, no read.
        assert_eq!(at(5, 1), (7, 0, 3));
        let ix = Shards::new(a.meta().shard.clone().unwrap(), a.meta().keys);
        assert_eq!(ix.name(&[3, 2]), "c/0/0 inner chunk 3/2");
        assert_eq!(ix.name(&[4, 4]), "c/1/1 inner chunk 0/0");
    }

    #[test]
    fn index_entries_are_checked_against_the_file() {
        let m = ShardMeta {
            shape: vec![4],
            per: vec![2],
            index_at_start: true,
            index_big: false,
            index_crc: true,
            inner: None,
        };
        let mut raw = Vec::new();
        for v in [40u64, 8, MISSING, MISSING] {
            raw.extend(v.to_le_bytes());
        }
        raw.extend(crc32c(&raw).to_le_bytes());
        let mut file = raw.clone();
        file.resize(48, 0);
        let src: Arc<dyn Source> = Arc::new(io::MemSource::new(file.clone()));
        let ix = Index::read(src, &m).unwrap();
        assert_eq!(ix.entry(0).unwrap(), Some((40, 8)));
        assert_eq!(ix.entry(1).unwrap(), None);
        assert!(ix.entry(2).is_err());
        // Over the index, past the end, a wrapping size.
        for (off, nb) in [(30u64, 8u64), (41, 8), (40, u64::MAX)] {
            let mut f = file.clone();
            f[..16].copy_from_slice(&[off.to_le_bytes(), nb.to_le_bytes()].concat());
            let c = crc32c(&f[..32]).to_le_bytes();
            f[32..36].copy_from_slice(&c);
            let ix = Index::read(Arc::new(io::MemSource::new(f)), &m).unwrap();
            assert!(ix.entry(0).is_err(), "{off} {nb}");
        }
        // A wrong checksum, a file shorter than its index.
        file[0] ^= 1;
        assert!(Index::read(Arc::new(io::MemSource::new(file.clone())), &m).is_err());
        assert!(Index::read(Arc::new(io::MemSource::new(&file[..30])), &m).is_err());
    }
}
