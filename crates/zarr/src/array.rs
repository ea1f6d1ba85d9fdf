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
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// The cache budget of an array opened without an [`Env`] of its own
/// (bytes of decoded chunks and blocks).
pub const CACHE_BYTES: u64 = 64 << 20;

pub struct ZarrArray {
    a: Arc<Inner>,
}

/// What a [`ZarrArray`] is, shared with the jobs that decode its chunks in
/// parallel ([`crate::ahead`]).
pub(crate) struct Inner {
    pub(crate) meta: ArrayMeta,
    store: Arc<dyn ChunkStore>,
    grid: Vec<u64>,
    header: Vec<u8>,
    pub(crate) chunks: Chunks,
    /// A sharded array's shards (the grid walked is the inner chunks').
    shards: Option<Shards>,
    /// Where the last read of the values ended, and how many reads in a
    /// row each began where one before it ended (`Inner::note_read`).
    last_end: AtomicU64,
    streak: AtomicU32,
}

/// How a chunk is fetched when a read first needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fetch {
    /// What the read needs first (a Blosc chunk read by block that may be
    /// longer than `chunks::WHOLE_MAX`: its header and block offsets; then
    /// its blocks as reads want them).
    Needed,
    /// All of it at once: a sequential reader will read all of it.
    Whole,
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
        let header =
            blosc_decode::npy::npy_header(&meta.dtype.descr, false, &meta.shape, meta.data_bytes());
        let a = Inner {
            grid: grid_shape(&meta),
            header,
            chunks: Chunks::new(&meta, env),
            shards: meta.shard.clone().map(|s| Shards::new(s, meta.keys)),
            meta,
            store,
            last_end: AtomicU64::new(0),
            streak: AtomicU32::new(0),
        };
        ZarrArray { a: Arc::new(a) }
    }

    /// What it reads through: the cache and the counters.
    pub fn env(&self) -> &Env {
        self.a.chunks.env()
    }

    /// Are its chunks read by Blosc block ([`crate::chunks::by_block`])?
    pub fn by_block(&self) -> bool {
        self.a.chunks.by_block()
    }

    pub fn meta(&self) -> &ArrayMeta {
        &self.a.meta
    }

    /// The `.npy` header of the values ([`blosc_decode::npy::npy_header`]).
    pub fn npy_header(&self) -> &[u8] {
        &self.a.header
    }

    /// Bytes of the `.npy` file: header and values.
    pub fn npy_len(&self) -> u64 {
        self.a.header.len() as u64 + self.a.meta.data_bytes()
    }

    /// Chunks decoded whole so far (a chunk read by block counts its
    /// blocks in the [`Env`]'s `blocks_decoded`).
    pub fn decodes(&self) -> u64 {
        self.a.chunks.decodes()
    }

    /// Shard indexes read so far (0 for an array without shards).
    pub fn index_reads(&self) -> u64 {
        self.a.shards.as_ref().map_or(0, Shards::index_reads)
    }

    /// Read the `.npy` file's bytes at `off` into `buf`; fewer at its end.
    pub fn read_npy_at(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        let header = &self.a.header;
        let h = header.len() as u64;
        let mut done = 0;
        if off < h {
            let n = ((h - off) as usize).min(buf.len());
            buf[..n].copy_from_slice(&header[off as usize..off as usize + n]);
            done = n;
        }
        let at = off.max(h) - h;
        Ok(done + self.read_values_at(at, &mut buf[done..])?)
    }

    /// Read the C-order values' bytes at `off` into `buf`; fewer at their
    /// end. The chunks it touches past the first are handed to the runner
    /// of the [`Env`], if any, to be decoded meanwhile, and the read is
    /// served chunk by chunk (`crate::ahead`).
    pub fn read_values_at(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        let total = self.a.meta.data_bytes();
        if off >= total {
            return Ok(0);
        }
        let n = (total - off).min(buf.len() as u64);
        crate::ahead::read(&self.a, off, &mut buf[..n as usize])?;
        Ok(n as usize)
    }
}

/// The bytes from a C-order offset that one chunk holds contiguously (in
/// the array's order and in its own).
pub(crate) struct Run {
    /// The chunk's grid position.
    pub(crate) pos: Vec<u64>,
    /// Where they start in the chunk's values.
    pub(crate) at: u64,
    /// How many (up to the end of the chunk's row, or of its rows when it
    /// spans whole rows; at most to the end of the request).
    pub(crate) len: u64,
}

impl Inner {
    /// The run of bytes from `b` (up to `end` at most).
    pub(crate) fn run_at(&self, b: u64, end: u64) -> Run {
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
        // Across the trailing dimensions a chunk spans exactly (a chunk of
        // whole rows, or of whole planes), its C order is the array's: the
        // run of a chunk decoded whole goes on to the end of its extent in
        // the dimension before. (A chunk read by Blosc block keeps runs of
        // a row: a run over whole blocks is decoded into the reader's
        // buffer, not the cache, and a job decoding ahead would decode
        // them again.)
        let mut j = nd.saturating_sub(1);
        while j > 0 && m.chunks[j] == m.shape[j] && !self.chunks.by_block() {
            j -= 1;
        }
        let run = match nd {
            0 => 1,
            _ => {
                let (tail, shape) = (&idx[j + 1..], &m.shape[j + 1..]);
                let across: u64 = shape.iter().product();
                let lines = (m.chunks[j] - inner[j]).min(m.shape[j] - idx[j]);
                lines * across - linear(tail, shape)
            }
        };
        Run {
            pos,
            at: linear(&inner, &m.chunks) * s + r,
            len: ((e + run) * s).min(end) - b,
        }
    }

    /// Copy bytes `at..` of `chunk` (at grid position `pos`) into `dst`.
    pub(crate) fn copy(
        &self,
        chunk: &Chunk,
        pos: &[u64],
        at: u64,
        dst: &mut [u8],
        how: Fetch,
    ) -> Result<()> {
        let copied = chunk.copy(at, dst).map_err(|e| in_key(e, &self.key(pos)))?;
        // A reader that reads on is done with a Blosc block, or a chunk
        // decoded whole, once it has its last bytes: its buffer is the
        // next one decoded into.
        let end = at + dst.len() as u64;
        match (chunk, how) {
            (Chunk::Blocks(c), Fetch::Whole) => c.done_with(at, end),
            (Chunk::Whole(_), Fetch::Whole) if end == self.last_byte(pos) => {
                self.chunks.done(self.id(pos));
            }
            _ => {}
        }
        if !copied {
            let (s, fill) = (self.meta.dtype.size, &self.meta.fill);
            for (i, x) in dst.iter_mut().enumerate() {
                *x = fill[((at + i as u64) % s) as usize];
            }
        }
        Ok(())
    }

    /// Where the values of the chunk at grid position `pos` that the array
    /// shows end in it (an edge chunk's are cut to the array's shape): the
    /// end of the last run a C-order reader copies from it.
    fn last_byte(&self, pos: &[u64]) -> u64 {
        let m = &self.meta;
        // The last element's place in the chunk, in C order (`linear`).
        let last = (pos.iter().zip(&m.chunks).zip(&m.shape))
            .fold(0u64, |a, ((p, c), n)| a * c + (n - p * c).min(*c) - 1);
        (last + 1) * m.dtype.size
    }

    /// How messages name the chunk at grid position `pos`: its key (for a
    /// sharded array, its shard's key and its place in the shard).
    fn key(&self, pos: &[u64]) -> String {
        match &self.shards {
            Some(s) => s.name(pos),
            None => chunk_key(self.meta.keys, pos),
        }
    }

    /// The number of the chunk at grid position `pos`.
    pub(crate) fn id(&self, pos: &[u64]) -> u64 {
        linear(pos, &self.grid)
    }

    /// A read of `len` bytes of the values at `off` begins: how its chunks
    /// not opened yet are to be fetched. A reader whose reads have followed
    /// each other twice in a row reads on, so a chunk it comes to is
    /// fetched whole; one that jumps (a row read through `mmap`, a random
    /// read) fetches what it needs. A read follows when it starts at most
    /// one read's length past the furthest end so far, or at most four
    /// behind it (the kernel's read-ahead requests, served by several
    /// threads, arrive a little out of order). Every reader of the array
    /// counts (handles open at once share it).
    pub(crate) fn note_read(&self, off: u64, len: u64) -> Fetch {
        // (Readers racing here can only make a chunk fetched one way or
        // the other.)
        let (end, prev) = (
            off.saturating_add(len),
            self.last_end.load(Ordering::Relaxed),
        );
        let follows = off <= prev.saturating_add(len) && off.saturating_add(4 * len) >= prev;
        let last = if follows { prev.max(end) } else { end };
        self.last_end.store(last, Ordering::Relaxed);
        let streak = match follows {
            true => self
                .streak
                .fetch_add(1, Ordering::Relaxed)
                .saturating_add(1),
            false => {
                self.streak.store(0, Ordering::Relaxed);
                0
            }
        };
        match streak >= 2 {
            true => Fetch::Whole,
            false => Fetch::Needed,
        }
    }

    /// The chunk at grid position `pos` (remembered, cached, or loaded
    /// once however many readers want it at once, fetched as `how` says).
    /// Its key is made only when the chunk is looked for in the store.
    pub(crate) fn chunk(&self, pos: &[u64], how: Fetch) -> Result<Chunk> {
        self.chunks.get(self.id(pos), |id| self.fetch(pos, id, how))
    }

    /// Fetch and open (or decode) chunk `id` at grid position `pos`,
    /// whether or not it is known already.
    pub(crate) fn fetch(&self, pos: &[u64], id: u64, how: Fetch) -> Result<Chunk> {
        let key = self.key(pos);
        let src = match &self.shards {
            Some(s) => s.inner(self.store.as_ref(), pos),
            None => self.store.open(&key, self.chunks.first(&self.meta, how)),
        };
        match src {
            Ok(Some(src)) => self
                .chunks
                .load(&self.meta, id, src, &key)
                .map_err(|e| in_key(e, &key)),
            Ok(None) => Ok(Chunk::Missing),
            Err(e) => Err(in_key(e, &key)),
        }
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
    use blosc_decode::io::{First, Source};

    /// A store holding nothing.
    struct Empty;

    impl ChunkStore for Empty {
        fn open(&self, _key: &str, _first: First) -> Result<Option<Arc<dyn Source>>> {
            Ok(None)
        }
    }

    /// A run goes on across the trailing dimensions a chunk spans exactly,
    /// to the end of the chunk's extent in the dimension before (cut at
    /// the array's edge); elsewhere it ends with the chunk's row.
    #[test]
    fn a_run_spans_the_whole_rows_and_planes_of_a_chunk() {
        let array = |chunks: &str| {
            let doc = format!(
                r#"{{"zarr_format": 2, "shape": [5, 4, 6], "chunks": {chunks},
                "dtype": "|u1", "order": "C", "fill_value": 0, "filters": null,
                "compressor": null}}"#
            );
            ZarrArray::new(
                ArrayMeta::parse(doc.as_bytes(), true).unwrap(),
                Arc::new(Empty),
            )
        };
        let el = |i: u64, j: u64, k: u64| (i * 4 + j) * 6 + k;
        // (chunks, element, run length, where in its chunk)
        let cases = [
            ("[2, 4, 6]", el(0, 0, 0), 48, 0),
            ("[2, 4, 6]", el(1, 2, 3), 9, el(1, 2, 3)),
            ("[3, 4, 6]", el(3, 0, 0), 48, 0),
            ("[2, 2, 6]", el(0, 1, 0), 6, 6),
            ("[2, 2, 6]", el(0, 2, 2), 10, 2),
            ("[2, 4, 4]", el(0, 0, 1), 3, 1),
            ("[2, 4, 4]", el(0, 0, 4), 2, 0),
        ];
        for (chunks, e, len, at) in cases {
            let r = array(chunks).a.run_at(e, 1000);
            assert_eq!((r.len, r.at), (len, at), "chunks {chunks}, element {e}");
        }
        assert_eq!(
            array("[2, 4, 6]").a.run_at(5, 20).len,
            15,
            "cut at the read's end"
        );
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

    /// Chunks are fetched whole from the second read in a row that follows
    /// the ones before (a little out of order included); a jump starts
    /// over, and so does reading the array again from its start.
    #[test]
    fn a_reader_that_reads_on_fetches_chunks_whole() {
        let doc = br#"{"zarr_format": 2, "shape": [1073741824], "chunks": [1048576],
          "dtype": "|u1", "order": "C", "fill_value": 0, "filters": null,
          "compressor": null}"#;
        let a = ZarrArray::new(ArrayMeta::parse(doc, true).unwrap(), Arc::new(Empty));
        let (m, w) = (1u64 << 20, Fetch::Whole);
        let reads = [
            (0, 16 << 10, Fetch::Needed),
            (16 << 10, m, w),
            // Two requests served in the other order.
            (16 + (2 << 20), m, w),
            (16 + m, m, w),
            (16 + 3 * m, m, w),
            // A jump, then the kernel's read-ahead after it.
            (500 * m, m, Fetch::Needed),
            (501 * m, m, Fetch::Needed),
            (502 * m, m, w),
            // Read again from the start.
            (0, m, Fetch::Needed),
            (m, m, Fetch::Needed),
            (2 * m, m, w),
        ];
        for (i, (off, len, how)) in reads.into_iter().enumerate() {
            assert_eq!(a.a.note_read(off, len), how, "read {i} at {off}");
        }
    }
}
