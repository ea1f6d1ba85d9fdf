//! Where a read's chunk values come from, and what is kept of them.
//!
//! A chunk whose pipeline is Blosc alone ([`by_block`]) is opened as a
//! blosc-decode [`Container`] over its encoded bytes: a read decodes only
//! the Blosc blocks it touches, and they are kept in the shared cache of
//! the array's [`Env`] under `(array id, chunk number, block)`, so that a
//! container opened again finds them. Any other chunk is decoded whole
//! ([`decode_chunk`]) and kept in the same cache under `(array id, chunk
//! number, 0)`. Per array, the last [`MAX_OPEN`] opened containers (each
//! holds its file open) and [`MAX_MISSING`] chunks the store does not hold
//! are remembered; the array's cache entries are forgotten when it is
//! dropped.

use crate::array::Fetch;
use crate::codec::{self, decode_chunk};
use crate::meta::{ArrayMeta, Codec};
use crate::store::{read_bounded, with_bounded};
use crate::{Error, Result};
use blosc_decode::cache::{Block, BlockBuf, BlockKey, Stats};
use blosc_decode::container::{new_cache_id, Container, Env};
use blosc_decode::io::{First, Source};
use blosc_decode::open::open_chunk;
use lru::LruCache;
use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Opened chunk containers remembered per array, at most (each holds
/// its chunk's file, or object, and its block offsets).
pub const MAX_OPEN: usize = 32;

/// Chunks known to be unwritten remembered per array, at most.
pub const MAX_MISSING: usize = 1024;

/// The block number of the runner-table key under which a chunk read by
/// block is registered while it is opened (no chunk has that many blocks).
const OPENING: u32 = u32::MAX;

/// What is fetched with the open of a Blosc chunk read by block that may
/// be longer than [`WHOLE_MAX`]: its header and the offsets of up to
/// 16,000 blocks.
const BLOSC_HEAD: u64 = 64 << 10;

/// A Blosc chunk read by block that can be this long at most is fetched
/// whole with its open, as any other chunk is: one GET for all its blocks
/// (zarr-python's cost for the chunk), which are still decoded only as
/// reads need them.
const WHOLE_MAX: u64 = 16 << 20;

/// One chunk's values, as a read finds them.
#[derive(Clone)]
pub(crate) enum Chunk {
    /// Never written: the fill value.
    Missing,
    /// Decoded whole (held in the shared cache too, if it fits there).
    Whole(Block),
    /// A Blosc chunk read block by block.
    Blocks(Arc<Container>),
}

impl Chunk {
    /// Copy the chunk's values at `at` into all of `dst`; false for a
    /// chunk never written.
    pub(crate) fn copy(&self, at: u64, dst: &mut [u8]) -> Result<bool> {
        let short = || Error::corrupt("chunk shorter than its shape");
        match self {
            Chunk::Missing => return Ok(false),
            Chunk::Whole(b) => {
                let src = usize::try_from(at)
                    .ok()
                    .and_then(|a| b.get(a..a.checked_add(dst.len())?))
                    .ok_or_else(short)?;
                dst.copy_from_slice(src);
            }
            Chunk::Blocks(c) => {
                if c.read_at(at, dst)? != dst.len() {
                    return Err(short());
                }
            }
        }
        Ok(true)
    }
}

impl Drop for Chunks {
    /// The array's chunks and blocks leave the shared cache with it.
    fn drop(&mut self) {
        self.env.cache.forget_container(self.id);
    }
}

/// The block a chunk decoded whole is, for the readers waiting for it.
pub(crate) fn whole(r: &Result<Chunk>) -> Option<Block> {
    match r {
        Ok(Chunk::Whole(b)) => Some(b.clone()),
        _ => None,
    }
}

fn nonzero(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN)
}

/// Is the output of a chunk's Blosc its values as presented, in C order,
/// so that a read may decode only the Blosc blocks it touches? Blosc is
/// the pipeline's only bytes codec (no checksum over the whole encoded
/// chunk after it, no other compressor), and no filter, transpose or byte
/// swap follows its decoding.
pub fn by_block(meta: &ArrayMeta) -> bool {
    meta.codecs == [Codec::Blosc]
        && meta.filters.is_empty()
        && !meta.swap
        && meta.stored_bytes() == meta.chunk_bytes()
}

/// The chunks of one array: how they are read and what is kept of them.
pub(crate) struct Chunks {
    env: Env,
    /// The first part of the cache keys of whole decoded chunks.
    id: u64,
    by_block: bool,
    open: Mutex<LruCache<u64, Arc<Container>>>,
    missing: Mutex<LruCache<u64, ()>>,
    /// Chunks decoded whole so far.
    decodes: AtomicU64,
}

impl Chunks {
    pub(crate) fn new(meta: &ArrayMeta, env: Env) -> Chunks {
        Chunks {
            env,
            id: new_cache_id(),
            by_block: by_block(meta),
            open: Mutex::new(LruCache::new(nonzero(MAX_OPEN))),
            missing: Mutex::new(LruCache::new(nonzero(MAX_MISSING))),
            decodes: AtomicU64::new(0),
        }
    }

    pub(crate) fn env(&self) -> &Env {
        &self.env
    }

    pub(crate) fn decodes(&self) -> u64 {
        self.decodes.load(Ordering::Relaxed)
    }

    pub(crate) fn by_block(&self) -> bool {
        self.by_block
    }

    /// What a read of a chunk file reads first: all of it (its encoded
    /// size is about its stored size), but for a random reader (`how`) of
    /// a Blosc chunk read by block that may be longer than [`WHOLE_MAX`],
    /// only its header and block offsets.
    pub(crate) fn first(&self, meta: &ArrayMeta, how: Fetch) -> First {
        let stored = meta.stored_bytes();
        let whole = stored.saturating_add(stored / 64).saturating_add(4096);
        match self.by_block && how == Fetch::Needed && whole > WHOLE_MAX {
            true => First::Head(BLOSC_HEAD),
            false => First::Head(whole),
        }
    }

    pub(crate) fn key(&self, id: u64) -> BlockKey {
        (self.id, id, 0)
    }

    /// A reader that reads on has had the last bytes of chunk `id` (decoded
    /// whole): it is the first evicted, and its buffer the next one a
    /// chunk is decoded into.
    pub(crate) fn done(&self, id: u64) {
        self.env.cache.done(&self.key(id));
    }

    /// The chunk numbered `id` (its linear grid position), if it is known.
    pub(crate) fn known(&self, id: u64) -> Option<Chunk> {
        if self.missing.lock().get(&id).is_some() {
            return Some(Chunk::Missing);
        }
        if self.by_block {
            return self.open.lock().get(&id).cloned().map(Chunk::Blocks);
        }
        let stats = &self.env.stats;
        match self.env.cache.get(&self.key(id)) {
            Some(b) => {
                Stats::add(&stats.cache_hits, 1);
                Some(Chunk::Whole(b))
            }
            None => {
                Stats::add(&stats.cache_misses, 1);
                None
            }
        }
    }

    /// Chunk `id`: known, or found by `load` (and kept). A chunk decoded
    /// whole is loaded once however many readers (and decoding jobs) want
    /// it at once: the first registers it in the runner's table (as blocks
    /// are: `Ahead::load_once`), the others wait for it there.
    pub(crate) fn get(&self, id: u64, load: impl FnOnce(u64) -> Result<Chunk>) -> Result<Chunk> {
        if let Some(c) = self.known(id) {
            return Ok(c);
        }
        if self.by_block {
            return self.open_once(id, load);
        }
        self.env.ahead.load_once(
            self.key(id),
            || self.remembered(id),
            || self.load_kept(id, load),
            whole,
            Chunk::Whole,
        )
    }

    /// Chunk `id`, read by block: opened by one reader (or job) at a time,
    /// registered in the runner's table under a key of its own while it is
    /// opened (`Ahead::load_once`), so that a reader and a job decoding
    /// ahead never both fetch it (a reader that reads on fetches a chunk
    /// whole). The others wait, then find the opened chunk known; if the
    /// opening failed, they try in turn. (No block is ever published under
    /// that key: `Chunk::Whole` is never reached.)
    fn open_once(&self, id: u64, load: impl FnOnce(u64) -> Result<Chunk>) -> Result<Chunk> {
        self.env.ahead.load_once(
            (self.id, id, OPENING),
            || self.known(id),
            || self.load_kept(id, load),
            |_| None,
            Chunk::Whole,
        )
    }

    /// `load` chunk `id` and keep it.
    pub(crate) fn load_kept(
        &self,
        id: u64,
        load: impl FnOnce(u64) -> Result<Chunk>,
    ) -> Result<Chunk> {
        let c = load(id)?;
        self.keep(id, &c);
        Ok(c)
    }

    /// Chunk `id` if it is known unwritten or cached (not counted as a
    /// cache lookup: [`Chunks::known`] counted this read's).
    fn remembered(&self, id: u64) -> Option<Chunk> {
        if self.missing.lock().get(&id).is_some() {
            return Some(Chunk::Missing);
        }
        self.env.cache.get(&self.key(id)).map(Chunk::Whole)
    }

    /// The opened container of chunk `id` (read by block), if remembered.
    pub(crate) fn opened(&self, id: u64) -> Option<Arc<Container>> {
        self.open.lock().peek(&id).cloned()
    }

    /// The cache key of block `i` of chunk `id` (read by block: the
    /// container is keyed as `(array id, id)`).
    pub(crate) fn block_key(&self, id: u64, i: u32) -> BlockKey {
        (self.id, id, i)
    }

    /// Is chunk `id` (decoded whole) known, cached, or being loaded?
    pub(crate) fn pending(&self, id: u64) -> bool {
        let key = self.key(id);
        self.missing.lock().contains(&id)
            || self.env.cache.contains(&key)
            || self.env.ahead.lookup(&key).is_some()
    }

    /// Remember chunk `id`, found as `c`.
    pub(crate) fn keep(&self, id: u64, c: &Chunk) {
        match c {
            Chunk::Whole(b) => self.env.cache.insert(self.key(id), b.clone()),
            Chunk::Blocks(c) => {
                self.open.lock().put(id, c.clone());
            }
            Chunk::Missing => {
                self.missing.lock().put(id, ());
            }
        }
    }

    /// The chunk whose encoded bytes `src` holds (stored at `key`).
    pub(crate) fn load(
        &self,
        meta: &ArrayMeta,
        id: u64,
        src: Arc<dyn Source>,
        key: &str,
    ) -> Result<Chunk> {
        if self.by_block {
            return self.blocks(meta, id, src, key);
        }
        let stored = meta.stored_bytes();
        let max = stored.saturating_mul(2).saturating_add(1 << 16);
        let read = |n: usize| {
            Stats::add(&self.env.stats.source_bytes_read, n as u64);
            self.decodes.fetch_add(1, Ordering::Relaxed);
        };
        if !codec::direct(meta) {
            let raw = read_bounded(src.as_ref(), max, key)?;
            read(raw.len());
            return Ok(Chunk::Whole(Arc::new(BlockBuf::from(decode_chunk(
                meta, raw,
            )?))));
        }
        // Into a buffer the cache gives back (a spare, or a chunk a reader
        // is done with): its pages are mapped, where a new one costs the
        // decoder a page fault per 4 KiB.
        let (mut out, _) = self.env.cache.buffer(stored as usize);
        match with_bounded(src.as_ref(), max, key, |raw| {
            read(raw.len());
            codec::decode_direct(meta, raw, &mut out)
        }) {
            Ok(()) => Ok(Chunk::Whole(Arc::new(out))),
            Err(e) => {
                self.env.cache.put_spare(out);
                Err(e)
            }
        }
    }

    /// Chunk `id`, a Blosc chunk, opened for reads by block: its header
    /// and block offsets read, its declared size checked against the chunk
    /// shape, its blocks keyed by the array's id and `id`.
    fn blocks(&self, meta: &ArrayMeta, id: u64, src: Arc<dyn Source>, key: &str) -> Result<Chunk> {
        let path = src
            .path()
            .map_or_else(|| Path::new(key).to_path_buf(), Path::to_path_buf);
        let c = Container::new(&path, open_chunk(src)?, self.env.clone())?.keyed_as(self.id, id);
        let want = meta.chunk_bytes();
        if c.raw_len() != want {
            return Err(Error::corrupt(format!(
                "blosc chunk header decoded to {} bytes, expected {want}",
                c.raw_len()
            )));
        }
        Ok(Chunk::Blocks(Arc::new(c)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(filters: &str, order: &str) -> ArrayMeta {
        let doc = format!(
            r#"{{"zarr_format": 2, "shape": [10], "chunks": [4], "dtype": "<i4",
              "order": "{order}", "fill_value": 0, "filters": {filters},
              "compressor": {{"id": "blosc", "cname": "lz4"}}}}"#
        );
        ArrayMeta::parse(doc.as_bytes(), true).unwrap()
    }

    fn v3(codecs: &str) -> ArrayMeta {
        let doc = format!(
            r#"{{"zarr_format": 3, "node_type": "array", "shape": [10, 6],
              "data_type": "int32", "fill_value": 0,
              "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [4, 3]}}}},
              "chunk_key_encoding": {{"name": "default"}}, "codecs": [{codecs}]}}"#
        );
        ArrayMeta::parse(doc.as_bytes(), false).unwrap()
    }

    const BYTES: &str = r#"{"name": "bytes", "configuration": {"endian": "little"}}"#;
    const BLOSC: &str = r#"{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
        "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}"#;

    #[test]
    fn only_a_pipeline_of_blosc_alone_is_read_by_block() {
        assert!(by_block(&v2("null", "C")));
        assert!(!by_block(&v2("null", "F")));
        assert!(!by_block(&v2(r#"[{"id": "delta", "dtype": "<i4"}]"#, "C")));
        assert!(by_block(&v3(&format!("{BYTES}, {BLOSC}"))) == cfg!(target_endian = "little"));
        let big = BYTES.replace("little", "big");
        assert!(!by_block(&v3(&format!("{big}, {BLOSC}"))));
        let crc = r#"{"name": "crc32c"}"#;
        assert!(!by_block(&v3(&format!("{BYTES}, {BLOSC}, {crc}"))));
        let zstd = r#"{"name": "zstd", "configuration": {"level": 0, "checksum": false}}"#;
        assert!(!by_block(&v3(&format!("{BYTES}, {zstd}"))));
        let t = r#"{"name": "transpose", "configuration": {"order": [1, 0]}}"#;
        assert!(!by_block(&v3(&format!("{t}, {BYTES}, {BLOSC}"))));
    }

    #[test]
    fn a_random_reader_fetches_a_blosc_chunk_whole_unless_it_may_be_long() {
        let long = |n: u64| {
            let doc = format!(
                r#"{{"zarr_format": 2, "shape": [{n}], "chunks": [{n}], "dtype": "<i4",
                  "order": "C", "fill_value": 0, "filters": null,
                  "compressor": {{"id": "blosc", "cname": "lz4"}}}}"#
            );
            ArrayMeta::parse(doc.as_bytes(), true).unwrap()
        };
        let first = |meta: &ArrayMeta, how| Chunks::new(meta, Env::new(1 << 20)).first(meta, how);
        let whole = |meta: &ArrayMeta| {
            let n = meta.stored_bytes();
            First::Head(n + n / 64 + 4096)
        };
        let (small, big) = (v2("null", "C"), long(4 << 20));
        assert_eq!(first(&small, Fetch::Needed), whole(&small));
        assert_eq!(first(&big, Fetch::Needed), First::Head(BLOSC_HEAD));
        assert_eq!(first(&big, Fetch::Whole), whole(&big));
        let edge = long(4_000_000);
        assert!(edge.stored_bytes() < WHOLE_MAX);
        assert_eq!(first(&edge, Fetch::Needed), whole(&edge));
    }
}
