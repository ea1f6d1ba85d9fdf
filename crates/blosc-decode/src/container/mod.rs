//! `Container`: an opened Blosc container, serving any byte range of its
//! uncompressed content by decoding only the blocks that range touches.
//!
//! The read path: the view (`view.rs`) maps presented bytes to raw content
//! (a `.npy` header, a b2nd array's C order: `gather.rs`); binary search of
//! the chunk table (`table.rs`) finds the chunks a range covers; for each,
//! the parsed chunk layout (header, block extents, dictionary — read once,
//! lazily) says where each block's streams are (`chunk.rs`); blocks are taken
//! from the shared LRU cache or the decode-ahead runner, or read and decoded
//! (`blocks.rs`), with the source read as `source_io.rs` decides. Blocks wholly
//! inside the request are decoded straight into the caller's buffer. Reads
//! of zero chunks need no decoding (`holes.rs`); what containers share (the
//! cache, the runner, the counters, options) is an [`Env`] (`env.rs`).

use crate::deferred::Deferred;
use crate::error::Result;
use crate::format::chunk::ChunkLayout;
use crate::index::{ChunkEntry, ChunkLoc, Index, Info};
use crate::sizes::Sizes;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

mod blocks;
mod chunk;
mod env;
mod fetched;
mod gather;
mod holes;
mod next;
mod source_io;
mod spans;
mod table;
mod view;

pub use env::{Env, DEFAULT_CACHE_SIZE, DEFAULT_DECODE_AHEAD};
pub use fetched::{Cache, Count};
pub use spans::{Served, Stream};
pub use view::View;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A number no container (nor other caller) of the process has: the first
/// part of the keys under which a reader that is not a container (a Zarr
/// array's whole decoded chunks) keeps its data in the shared cache.
pub fn new_cache_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// An opened container: any byte range of its presented content, read with
/// [`Container::read_at`], decodes only the blocks the range touches.
///
/// ```
/// # fn main() -> blosc_decode::Result<()> {
/// let path = std::path::Path::new(concat!(
///     env!("CARGO_MANIFEST_DIR"),
///     "/../../tests/data/frame/fixed-lz4.b2frame"
/// ));
/// let c = blosc_decode::open_path(path)?.expect("a Blosc2 frame");
/// let mut head = vec![0u8; 16];
/// c.read_at(0, &mut head)?;
/// assert_eq!(c.info().format, "blosc2-frame");
/// assert!(c.len() >= 16);
/// # Ok(())
/// # }
/// ```
pub struct Container {
    id: u64,
    path: PathBuf,
    index: Index,
    /// The check of the chunk sizes the index assumes, if it assumes them.
    sizes: Option<Sizes>,
    layouts: Vec<OnceLock<Arc<ChunkLayout>>>,
    /// How many of `layouts` are set.
    parsed: AtomicUsize,
    env: Env,
    view: View,
    /// Where the last read of any reader ended (presented offset): a read
    /// far from it is random (`source_io.rs`).
    last_end: AtomicU64,
    /// Has any span of it been decoded ahead? (Until then reads look for
    /// none: `spans.rs`.)
    spans_queued: AtomicBool,
    /// Bytes served so far of the spans being read (`spans.rs`).
    served: parking_lot::Mutex<Vec<(u64, u64)>>,
    /// Where the last block read from the source ended (source offset).
    src_end: Arc<AtomicU64>,
    /// Set once the chunk headers have been hinted to the kernel (the first
    /// random read).
    hinted: AtomicBool,
    /// The array's block shape from its `b2nd` (or `caterva`) metalayer,
    /// given to each chunk layout for the codecs that need it (ZFP).
    block_shape: Option<Arc<[u64]>>,
    /// What it holds, if it is a cache holding only some of its chunks
    /// (`fetched.rs`).
    cache: Option<Cache>,
    /// Added to a chunk's number in its blocks' cache keys
    /// ([`Container::keyed_as`]).
    key_chunk: u64,
    /// Is `id` its own (its blocks forgotten when it is dropped)?
    owns_id: bool,
}

impl Container {
    /// A container of the chunks `index` describes, read from `path`'s
    /// sources, sharing `env`'s cache and counters (see [`crate::open_path`]
    /// for opening a file).
    pub fn new(path: &Path, index: Index, env: Env) -> Result<Container> {
        index.validate().map_err(|e| e.in_file(path))?;
        let n = index.chunks.len();
        let block_shape = table::array_block_shape(&index.info);
        Ok(Container {
            id: new_cache_id(),
            path: path.to_path_buf(),
            sizes: index.sizes_assumed.then(Sizes::new),
            index,
            layouts: (0..n).map(|_| OnceLock::new()).collect(),
            parsed: AtomicUsize::new(0),
            env,
            view: View::Raw,
            last_end: AtomicU64::new(0),
            spans_queued: AtomicBool::new(false),
            served: parking_lot::Mutex::new(Vec::new()),
            src_end: Arc::new(AtomicU64::new(0)),
            hinted: AtomicBool::new(false),
            block_shape,
            cache: None,
            key_chunk: 0,
            owns_id: true,
        })
    }

    /// Take codec and filter names from the first stored chunk's own header
    /// (container headers use other numberings, and chunks are what count).
    pub fn refine_info(&mut self) {
        if let Some(l) = self.first_layout() {
            if l.special.is_none() {
                if let Ok(c) = l.header.codec() {
                    self.index.info.codec = c.name().to_string();
                }
                self.index.info.filters = crate::describe::filter_names(&l.header);
            }
        }
    }

    /// The layout of the first stored chunk (what `info` and the extended
    /// attributes describe the container by: its block size), if there is
    /// one and its header reads.
    pub fn first_layout(&self) -> Option<Arc<ChunkLayout>> {
        let ci = self
            .chunks()
            .iter()
            .position(|e| matches!(e.loc, ChunkLoc::Stored { .. }))?;
        self.layout(ci).ok()
    }

    /// Have spare buffers of this container's block size mapped off the
    /// read path ([`Env::prepare_spares`]), for its first reads (an open).
    pub fn prepare_spares(&self) {
        if let Some(l) = self.first_layout() {
            self.env.prepare_spares(l.block_len(0) as usize);
        }
    }

    /// How the raw content is presented (as it is, or as a `.npy` file).
    pub fn view(&self) -> &View {
        &self.view
    }

    /// Presented length (the raw content, or the `.npy` file).
    pub fn len(&self) -> u64 {
        self.view.len(self.raw_len())
    }

    /// Uncompressed length of the raw content.
    pub fn raw_len(&self) -> u64 {
        self.index.info.nbytes
    }
    /// Is the presented content empty?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// What the container says about itself (format, codec, sizes,
    /// metalayers).
    pub fn info(&self) -> &Info {
        &self.index.info
    }
    /// Memory the chunk index holds, about (entries and their layout slots;
    /// layouts read since are not counted).
    pub fn index_bytes(&self) -> usize {
        self.index.chunks.len()
            * (std::mem::size_of::<ChunkEntry>()
                + std::mem::size_of::<OnceLock<Arc<ChunkLayout>>>())
    }

    /// Has a file of this container been deleted since it was opened?
    pub fn source_gone(&self) -> bool {
        self.index.sources.iter().any(|s| s.gone())
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// A number unique to this container in the process (its blocks' key in
    /// the shared cache).
    pub fn id(&self) -> u64 {
        self.id
    }
    /// Keep its blocks in the shared cache under `(id, chunk + c, block)`
    /// (`c` its own chunk number) instead of under an id of its own: they
    /// outlive it, and a container opened again over the same bytes and
    /// keyed alike finds them (a Zarr array's chunks, each a container).
    /// The caller owns `id` (from [`new_cache_id`]) and forgets it from
    /// the cache when done; dropping the container forgets nothing.
    pub fn keyed_as(mut self, id: u64, chunk: u64) -> Container {
        self.id = id;
        self.key_chunk = chunk;
        self.owns_id = false;
        self
    }

    /// What it shares with other containers.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// Fill `buf` from offset `offset` of the presented file, all the work
    /// done before it returns. Returns the bytes written: `buf.len()`
    /// unless the range runs past the end.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_at_deferring(offset, buf, &mut Deferred::none())
    }

    /// [`Container::read_at`], leaving to `later` what can wait until the
    /// caller has used `buf` (unshuffling and caching the rest of a block a
    /// small read needed a part of): run it after replying. (No decoding
    /// ahead: [`Container::read_shared`] does that.)
    pub fn read_at_deferring(
        &self,
        offset: u64,
        buf: &mut [u8],
        later: &mut Deferred,
    ) -> Result<usize> {
        let (_, jump) = self.note_read(offset, buf.len());
        self.hint_cold_chunks(offset, buf.len(), jump);
        let read = self.read_view_at(offset, buf, later);
        self.hint_headers(jump);
        read
    }

    /// A read of `len` bytes at `offset` begins: returns where it ends and
    /// how far it starts from the previous read of any reader (the first
    /// far one has the chunk headers hinted once it is done: `source_io.rs`).
    fn note_read(&self, offset: u64, len: usize) -> (u64, u64) {
        let end = offset.saturating_add(len as u64);
        let prev = self.last_end.swap(end, Ordering::Relaxed);
        (end, offset.abs_diff(prev))
    }

    /// A reader that reads on has copied out the raw content from `start`
    /// to `end` (exclusive): it is done with each block of `end`'s chunk
    /// that ends in `start + 1..=end`, and those blocks go first when the
    /// cache wants room or a buffer to decode into
    /// ([`crate::cache::BlockCache::done`]).
    pub fn done_with(&self, start: u64, end: u64) {
        let t = &self.index.chunks;
        let Some(last) = end.checked_sub(1).filter(|_| !t.is_empty()) else {
            return;
        };
        let ci = table::chunk_at(t, last);
        let (Some(e), Some(l)) = (t.get(ci), self.layouts.get(ci).and_then(|l| l.get())) else {
            return;
        };
        let Some(a) = end.checked_sub(e.uoff) else {
            return;
        };
        // From the block `start` is in (or the chunk's first), while they
        // end by `end`.
        let mut i = l.block_at(start.saturating_sub(e.uoff).min(a - 1));
        while i < l.nblocks() && l.block_start(i) + u64::from(l.block_len(i)) <= a {
            let key = (self.id, self.key_chunk.wrapping_add(ci as u64), i);
            self.env.cache.done(&key);
            i += 1;
        }
    }

    /// Fill `buf` from offset `offset` of the raw uncompressed content.
    pub fn read_raw_at(&self, offset: u64, buf: &mut [u8], later: &mut Deferred) -> Result<usize> {
        let len = self.raw_len();
        if offset >= len || buf.is_empty() {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(len - offset) as usize;
        let chunks = self.table_to(offset, offset + want as u64)?;
        let mut done = 0usize;
        let mut ci = table::chunk_at(chunks, offset);
        while done < want {
            let entry = &chunks[ci];
            let pos = offset + done as u64;
            let a = pos - entry.uoff;
            let n = ((entry.ulen - a) as usize).min(want - done);
            self.read_chunk(ci, a, &mut buf[done..done + n], later)
                .map_err(|e| e.in_chunk(entry.chunk).in_file(&self.path))?;
            done += n;
            ci += 1;
        }
        crate::cache::Stats::add(&self.env.stats.bytes_served, done as u64);
        Ok(done)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if self.owns_id {
            self.env.cache.forget_container(self.id);
        }
    }
}
