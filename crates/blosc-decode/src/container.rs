//! `Container`: an opened Blosc container, serving any byte range of its
//! uncompressed content by decoding only the blocks that range touches.
//!
//! The read path: binary search the chunk table for the chunks a range
//! covers; for each, the parsed chunk layout (header, block extents,
//! dictionary — read once, lazily, the "lazy chunk" idea) says where each
//! block's streams are; blocks are taken from the shared LRU cache or read
//! and decoded. Blocks wholly inside the request are decoded straight into
//! the caller's buffer.

use crate::after;
use crate::ahead::{Ahead, Claim};
use crate::cache::{Block, BlockBuf, BlockCache, BlockKey, Stats};
use crate::decode;
use crate::ensure;
use crate::error::{Error, Result};
use crate::filter;
use crate::format::chunk::{BlockExtent, ChunkHeader, ChunkLayout, EXTENDED_HEADER_LEN};
use crate::index::{ChunkEntry, ChunkLoc, Index, Info};
use crate::io::{Access, Source};
use crate::npy::NdLayout;
use crate::sizes::Sizes;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

mod gather;

/// What containers share: the block cache, the decode-ahead pool, the
/// counters, and options.
#[derive(Clone)]
pub struct Env {
    pub cache: Arc<BlockCache>,
    pub stats: Arc<Stats>,
    pub ahead: Arc<Ahead>,
    /// Verify stored chunk checksums (Bloscpack) on first read of each chunk.
    pub verify_checksums: bool,
    /// How far past a sequential reader's last request to decode ahead
    /// (bytes; 0: only the blocks asked for).
    pub decode_ahead: u64,
    /// Whether block reads may bypass the page cache (`-o source_io`).
    pub source_io: Access,
}

/// Block reads smaller than this always go through the page cache.
const MIN_DIRECT: usize = 32 << 10;
/// A block read starting within this distance of the container's previous
/// one is taken as part of a sequential scan: through the page cache, so
/// the kernel's read-ahead works for it.
const SEQ_WINDOW: u64 = 8 << 20;

impl Env {
    /// A cache of `cache_bytes` and a pool of one thread per CPU (started on
    /// first use).
    pub fn new(cache_bytes: u64) -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        Env::with_workers(cache_bytes, cpus)
    }

    /// `workers` pool threads (0: no pool: no decoding ahead, and spare
    /// block buffers are not prepared in the background).
    pub fn with_workers(cache_bytes: u64, workers: usize) -> Self {
        Env {
            cache: Arc::new(BlockCache::new(cache_bytes)),
            stats: Arc::new(Stats::default()),
            ahead: Arc::new(Ahead::new(workers)),
            verify_checksums: true,
            decode_ahead: DEFAULT_DECODE_AHEAD,
            source_io: Access::Auto,
        }
    }
}

/// Default decode-ahead for sequential readers: off. The kernel's own
/// read-ahead keeps a request in flight per FUSE thread, so with as many
/// CPUs as FUSE threads every CPU already decodes and decoding ahead only
/// adds a copy (`scripts/bench.py` compares both). It pays where CPUs
/// outnumber the requests in flight and codecs are slow.
pub const DEFAULT_DECODE_AHEAD: u64 = 0;

/// Default bound of the decoded-block cache (bytes): the daemon's
/// `-o cache_size` default and [`Env::default`]'s.
pub const DEFAULT_CACHE_SIZE: u64 = 256 << 20;

impl Default for Env {
    fn default() -> Self {
        Env::new(DEFAULT_CACHE_SIZE)
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static READBUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The shuffled block of a partial read (`ChunkCtx::read_part`), kept
    /// for the thread's next one (up to `decode::KEEP_SCRATCH`).
    static PART: RefCell<BlockBuf> = RefCell::new(BlockBuf::new(0));
}

/// The largest part of a block answered before the block is cached
/// (`ChunkCtx::read_part`; also at most a quarter of the block). Larger
/// parts are mostly one end of a sequential reader's request, whose next
/// request wants the rest of the block: those blocks are decoded whole and
/// cached before the reply.
const PART_MAX: usize = 64 << 10;

pub struct Container {
    id: u64,
    path: PathBuf,
    index: Index,
    /// The check of the chunk sizes the index assumes, if it assumes them.
    sizes: Option<Sizes>,
    layouts: Vec<OnceLock<Arc<ChunkLayout>>>,
    env: Env,
    view: View,
    /// Where the last read ended (presented offset): reads that start there
    /// are sequential and get decode-ahead.
    last_end: AtomicU64,
    /// How far decode-ahead has queued (presented offset).
    ahead_to: AtomicU64,
    /// Where the last block read from the source ended (source offset).
    src_end: Arc<AtomicU64>,
    /// Set once the chunk headers have been hinted to the kernel (the first
    /// random read).
    hinted: AtomicBool,
    /// The array's block shape from its `b2nd` (or `caterva`) metalayer,
    /// given to each chunk layout for the codecs that need it (ZFP).
    block_shape: Option<Arc<[u64]>>,
}

/// How the raw uncompressed content is presented.
#[derive(Debug, Clone)]
pub enum View {
    /// As it is.
    Raw,
    /// As a `.npy` file: `header` then the array data, either the raw content
    /// itself (`nd: None`, e.g. Bloscpack arrays) or remapped from b2nd chunks
    /// and blocks into C order.
    Npy {
        header: Vec<u8>,
        nd: Option<Box<NdLayout>>,
        descr: String,
    },
}

impl View {
    /// Presented as a `.npy` file (with its header): named `NAME.npy`.
    /// An array whose dtype a header cannot carry has no header and keeps
    /// its source name.
    pub fn is_npy(&self) -> bool {
        matches!(self, View::Npy { header, .. } if !header.is_empty())
    }

    /// Presented length, given the raw content's length.
    pub fn len(&self, raw_len: u64) -> u64 {
        match self {
            View::Raw => raw_len,
            View::Npy {
                header,
                nd: Some(nd),
                ..
            } => header.len() as u64 + nd.data_len(),
            View::Npy {
                header, nd: None, ..
            } => header.len() as u64 + raw_len,
        }
    }
}

impl Container {
    pub fn new(path: &Path, index: Index, env: Env) -> Result<Container> {
        index.validate().map_err(|e| e.in_file(path))?;
        let n = index.chunks.len();
        let block_shape = array_block_shape(&index.info);
        Ok(Container {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            path: path.to_path_buf(),
            sizes: index.sizes_assumed.then(Sizes::new),
            index,
            layouts: (0..n).map(|_| OnceLock::new()).collect(),
            env,
            view: View::Raw,
            last_end: AtomicU64::new(0),
            ahead_to: AtomicU64::new(0),
            src_end: Arc::new(AtomicU64::new(0)),
            hinted: AtomicBool::new(false),
            block_shape,
        })
    }

    /// Take codec and filter names from the first stored chunk's own header
    /// (container headers use other numberings, and chunks are what count).
    pub fn refine_info(&mut self) {
        let first = self
            .index
            .chunks
            .iter()
            .position(|e| matches!(e.loc, ChunkLoc::Stored { .. }));
        if let Some(Ok(l)) = first.map(|ci| self.load_layout(ci)) {
            if l.special.is_none() {
                if let Ok(c) = l.header.codec() {
                    self.index.info.codec = c.name().to_string();
                }
                self.index.info.filters = crate::describe::filter_names(&l.header);
            }
        }
    }

    /// Present this container through `view` (checked against the content size).
    pub fn with_view(mut self, view: View) -> Result<Container> {
        if let View::Npy { nd: Some(nd), .. } = &view {
            ensure!(
                nd.raw_len() <= self.raw_len(),
                corrupt,
                "b2nd array needs {} bytes of chunk data but the frame holds {}",
                nd.raw_len(),
                self.raw_len()
            );
        }
        self.view = view;
        Ok(self)
    }

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
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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

    /// The chunk table as far as it is known: entries past the ones reads
    /// have checked may not be where their chunks are (see
    /// [`Container::checked_chunks`]).
    pub fn chunks(&self) -> &[ChunkEntry] {
        match self.sizes.as_ref().and_then(|s| s.rebuilt()) {
            Some(Ok(t)) => t,
            _ => &self.index.chunks,
        }
    }

    /// The chunk table, every entry where its chunk's own size puts it
    /// (the chunks' headers read, if they were not).
    pub fn checked_chunks(&self) -> Result<&[ChunkEntry]> {
        self.table_to(self.raw_len(), self.raw_len())
    }

    /// The chunk table, with the entries that hold raw bytes up to `end`
    /// checked: those before the one holding `from` by their chunks'
    /// headers alone, the others by their layouts (read now: a read of
    /// `from..end` needs them next). See [`crate::sizes`].
    fn table_to(&self, from: u64, end: u64) -> Result<&[ChunkEntry]> {
        let Some(sizes) = &self.sizes else {
            return Ok(&self.index.chunks);
        };
        let t = &self.index.chunks;
        let need = if end == 0 {
            0
        } else {
            chunk_at(t, end - 1) + 1
        };
        let first = chunk_at(t, from);
        sizes
            .checked(t, need, self.raw_len(), |ci| {
                let chunk = t[ci].chunk;
                self.stored_nbytes(ci, (first..need).contains(&ci))
                    .map_err(|e| e.in_chunk(chunk))
            })
            .map_err(|e| e.in_file(&self.path))
    }

    /// The uncompressed size stored chunk `ci`'s header gives, from its
    /// layout (read now if `layout`) or its first 16 bytes.
    fn stored_nbytes(&self, ci: usize, layout: bool) -> Result<u64> {
        if layout || self.layouts[ci].get().is_some() {
            return Ok(self.load_layout(ci)?.header.nbytes as u64);
        }
        match self.index.chunks[ci].loc {
            ChunkLoc::Stored { src, offset, .. } => {
                let source = self.index.sources[src as usize].as_ref();
                let n = crate::open::frame::chunk_nbytes(source, offset)?;
                Stats::add(&self.env.stats.source_bytes_read, 16);
                Ok(n)
            }
            ChunkLoc::Special { .. } => Err(Error::corrupt("internal: size of a special chunk")),
        }
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// Fill `buf` from offset `offset` of the presented file. Returns the
    /// bytes written: `buf.len()` unless the range runs past the end.
    ///
    /// A read that starts where the previous one ended (give or take its
    /// own length: the kernel's read-ahead requests may arrive out of order)
    /// queues the next `decode_ahead` bytes' blocks on the pool.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let ahead = self.env.decode_ahead;
        let end = offset.saturating_add(buf.len() as u64);
        let prev = self.last_end.swap(end, Ordering::Relaxed);
        let jump = offset.abs_diff(prev);
        self.hint_headers(jump);
        let n = self.read_view_at(offset, buf)?;
        if ahead > 0 && end < self.len() {
            if jump <= buf.len() as u64 {
                // Only past what earlier reads queued: with several FUSE
                // threads a slower request must not queue blocks a faster
                // one has consumed already.
                let target = end.saturating_add(ahead).min(self.len());
                let from = end.max(self.ahead_to.fetch_max(target, Ordering::Relaxed));
                if from < target {
                    self.decode_ahead(from, target - from);
                }
            } else {
                self.ahead_to.store(end, Ordering::Relaxed);
            }
        }
        Ok(n)
    }

    /// On the first random read (`jump`: its distance from the previous
    /// one, further than `SEQ_WINDOW` or a quarter of the file), have the
    /// kernel read the start (header and
    /// block starts) of every stored chunk not parsed yet, all at once and
    /// in the background: the first read of each chunk after that waits for
    /// one disk read (its block) instead of two in a row (the bench's cold
    /// random reads, `scripts/bench.py`, measure it). Sequential
    /// readers never ask for it; at most `MAX_HINTED` chunks are hinted.
    fn hint_headers(&self, jump: u64) {
        /// Header and block starts of chunks of up to ~2,000 blocks.
        const HEAD: u64 = 8 << 10;
        const MAX_HINTED: usize = 1 << 16;
        // Random: far from the previous read (a sequential scan's requests
        // arrive a little out of order, and hints would only slow it; a
        // quarter of a small file is far). Once per container.
        if self.hinted.load(Ordering::Relaxed)
            || jump <= SEQ_WINDOW.min(self.len() / 4)
            || self.hinted.swap(true, Ordering::Relaxed)
        {
            return;
        }
        let want: Vec<(u32, u64, u64)> = self
            .index
            .chunks
            .iter()
            .zip(&self.layouts)
            .filter_map(|(e, l)| match e.loc {
                ChunkLoc::Stored {
                    src,
                    offset,
                    cbytes,
                } if l.get().is_none() => Some((src, offset, cbytes.min(HEAD))),
                _ => None,
            })
            .take(MAX_HINTED)
            .collect();
        if want.len() < 2 {
            return;
        }
        let sources = self.index.sources.clone();
        // On the pool's I/O chore thread: thousands of hints take
        // milliseconds. Not at idle priority: the reads it is for come soon.
        self.env.ahead.spawn_io(Box::new(move || {
            for (src, offset, len) in want {
                sources[src as usize].will_need(offset, len);
            }
        }));
    }

    /// Are presented bytes `offset..offset+len` all in zero chunks, as known
    /// from the index or chunk headers already read (nothing is read or
    /// decoded)? A read of a hole can then be answered without writing zeros.
    pub fn is_zero(&self, offset: u64, len: u64) -> bool {
        let header = match &self.view {
            View::Raw => 0,
            View::Npy { header, .. } => header.len() as u64,
        };
        if len == 0 || offset < header || offset.saturating_add(len) > self.len() {
            return false;
        }
        self.raw_runs(offset, len, |raw, n| self.raw_is_zero(raw, n))
    }

    /// Call `f(raw offset, length)` for the runs of raw content that the
    /// presented bytes `from..from+len` (past a `.npy` header) come from,
    /// until it returns false. True if it never did (and the array layout
    /// could be walked).
    fn raw_runs(&self, from: u64, len: u64, mut f: impl FnMut(u64, u64) -> bool) -> bool {
        let (hl, nd) = match &self.view {
            View::Raw => return f(from, len),
            View::Npy { header, nd, .. } => (header.len() as u64, nd),
        };
        let end = from.saturating_add(len).saturating_sub(hl);
        let from = from.max(hl) - hl;
        if end <= from {
            return true;
        }
        match nd {
            None => f(from, end - from),
            Some(nd) => {
                let is = nd.itemsize;
                let e0 = from / is;
                let e1 = end.div_ceil(is).min(nd.data_len() / is);
                e1 <= e0
                    || nd
                        .for_each_run(e0, e1 - e0, |raw, k| match f(raw, k * is) {
                            true => Ok(()),
                            // Ends the walk (not reported).
                            false => Err(Error::corrupt("walk stopped")),
                        })
                        .is_ok()
            }
        }
    }

    fn raw_is_zero(&self, off: u64, len: u64) -> bool {
        let end = off.saturating_add(len);
        if len == 0 || end > self.raw_len() {
            return false;
        }
        let Ok(chunks) = self.table_to(off, end) else {
            return false;
        };
        let mut ci = chunk_at(chunks, off);
        while ci < chunks.len() && chunks[ci].uoff < end {
            let zero = match &chunks[ci].loc {
                ChunkLoc::Special { kind, .. } => kind.is_zeros(),
                ChunkLoc::Stored { .. } => self.layouts[ci]
                    .get()
                    .and_then(|l| l.special)
                    .is_some_and(|k| k.is_zeros()),
            };
            if !zero {
                return false;
            }
            ci += 1;
        }
        true
    }

    /// Queue the blocks of presented bytes `from..from+len` that are neither
    /// cached nor queued.
    fn decode_ahead(&self, from: u64, len: u64) {
        self.raw_runs(from, len, |raw, n| self.queue_raw(raw, n));
    }

    /// Queue the blocks of raw bytes `off..off+len` (see `decode_ahead`).
    /// False once the queue is full (enough is ahead).
    fn queue_raw(&self, off: u64, len: u64) -> bool {
        let end = off.saturating_add(len).min(self.raw_len());
        if off >= end {
            return true;
        }
        let Ok(chunks) = self.table_to(off, end) else {
            return false;
        };
        let mut ci = chunk_at(chunks, off);
        while ci < chunks.len() && chunks[ci].uoff < end {
            let e = &chunks[ci];
            if let ChunkLoc::Stored { src, offset, .. } = e.loc {
                let Ok(layout) = self.layout(ci) else {
                    return false;
                };
                if layout.special.is_none() {
                    let ctx = self.ctx(ci, layout, src, offset);
                    let a = off.max(e.uoff) - e.uoff;
                    let b = end.min(e.uoff + e.ulen) - e.uoff;
                    for i in ctx.layout.block_at(a)..=ctx.layout.block_at(b - 1) {
                        if !ctx.queue(i) {
                            return false;
                        }
                    }
                }
            }
            ci += 1;
        }
        true
    }

    fn read_view_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let (header, nd) = match &self.view {
            View::Raw => return self.read_raw_at(offset, buf),
            View::Npy { header, nd, .. } => (header, nd),
        };
        let len = self.len();
        if offset >= len || buf.is_empty() {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(len - offset) as usize;
        let buf = &mut buf[..want];
        let hl = header.len() as u64;
        let mut done = 0usize;
        if offset < hl {
            let n = ((hl - offset) as usize).min(want);
            buf[..n].copy_from_slice(&header[offset as usize..offset as usize + n]);
            done = n;
        }
        if done == want {
            return Ok(want);
        }
        let data_off = offset + done as u64 - hl;
        let out = &mut buf[done..];
        match nd {
            None => {
                let got = self.read_raw_at(data_off, out)?;
                ensure!(
                    got == out.len(),
                    truncated,
                    "array data shorter than its header says"
                );
            }
            Some(nd) => self.read_array(nd, data_off, out)?,
        }
        Ok(want)
    }

    /// Fill `buf` from offset `offset` of the raw uncompressed content.
    pub fn read_raw_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let len = self.raw_len();
        if offset >= len || buf.is_empty() {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(len - offset) as usize;
        let chunks = self.table_to(offset, offset + want as u64)?;
        let mut done = 0usize;
        let mut ci = chunk_at(chunks, offset);
        while done < want {
            let entry = &chunks[ci];
            let pos = offset + done as u64;
            let a = pos - entry.uoff;
            let n = ((entry.ulen - a) as usize).min(want - done);
            self.read_chunk(ci, a, &mut buf[done..done + n])
                .map_err(|e| e.in_chunk(entry.chunk).in_file(&self.path))?;
            done += n;
            ci += 1;
        }
        Stats::add(&self.env.stats.bytes_served, done as u64);
        Ok(done)
    }

    /// The parsed layout of stored chunk `ci`, read on first use, checked
    /// to hold as many bytes as its entry in the chunk table.
    pub fn layout(&self, ci: usize) -> Result<Arc<ChunkLayout>> {
        let layout = self.load_layout(ci)?;
        let e = &self.index.chunks[ci];
        let ulen = match self.sizes {
            None => e.ulen,
            Some(_) => self.table_to(e.uoff, e.uoff + 1)?[ci].ulen,
        };
        ensure!(
            layout.header.nbytes as u64 == ulen,
            corrupt,
            "chunk holds {} bytes but the container expects {ulen}",
            layout.header.nbytes
        );
        Ok(layout)
    }

    /// The parsed layout of stored chunk `ci`, read on first use.
    fn load_layout(&self, ci: usize) -> Result<Arc<ChunkLayout>> {
        if let Some(l) = self.layouts[ci].get() {
            return Ok(l.clone());
        }
        let entry = &self.index.chunks[ci];
        let ChunkLoc::Stored {
            src,
            offset,
            cbytes,
        } = entry.loc
        else {
            return Err(Error::corrupt("internal: layout of a special chunk"));
        };
        let source = &self.index.sources[src as usize];
        if self.env.verify_checksums {
            if let Some(ck) = &entry.checksum {
                self.verify_checksum(source.as_ref(), offset, cbytes, ck)?;
            }
        }
        // The index may only bound the chunk (sparse frames record a
        // placeholder so chunk files need not be opened at mount): the
        // source's real length bounds it too, before any size is trusted.
        let cbytes = cbytes.min(source.len().saturating_sub(offset));
        let head_len = (EXTENDED_HEADER_LEN as u64).min(cbytes) as usize;
        let mut head = vec![0u8; head_len];
        self.src_read(source.as_ref(), offset, &mut head)?;
        let header = ChunkHeader::parse(&head)?;
        ensure!(
            header.cbytes as u64 <= cbytes,
            corrupt,
            "chunk header says {} compressed bytes but only {cbytes} are available",
            header.cbytes
        );
        let mut need = ChunkLayout::prefix_needed(&header, &head)?;
        let mut prefix = head;
        loop {
            if prefix.len() < need {
                let old = prefix.len();
                prefix.resize(need, 0);
                self.src_read(source.as_ref(), offset + old as u64, &mut prefix[old..])?;
            }
            let again = ChunkLayout::prefix_needed(&header, &prefix)?;
            if again <= prefix.len() {
                break;
            }
            need = again;
        }
        let mut layout = ChunkLayout::parse_with(&prefix, |extents| {
            self.read_vl_sizes(source.as_ref(), offset, extents)
        })?;
        layout.block_shape = self.block_shape.clone();
        let layout = Arc::new(layout);
        let _ = self.layouts[ci].set(layout.clone());
        Ok(layout)
    }

    /// The size field at the start of each block (`extents`, in block order)
    /// of the VL-block chunk at `offset`: fields less than a page apart are
    /// read together (the source is read a page at a time anyway), so a
    /// chunk of many small blocks costs a few reads.
    fn read_vl_sizes(
        &self,
        source: &dyn Source,
        offset: u64,
        extents: &[BlockExtent],
    ) -> Result<Vec<i32>> {
        const NEAR: u64 = 4 << 10;
        let mut sizes = Vec::with_capacity(extents.len());
        let mut buf = Vec::new();
        let mut k = 0;
        while k < extents.len() {
            let from = extents[k].start as u64;
            let mut j = k;
            while j + 1 < extents.len() && (extents[j + 1].start as u64) < from + NEAR {
                j += 1;
            }
            // The extents are checked: in order, each holding its field,
            // and inside the chunk.
            buf.resize((extents[j].start as u64 + 4 - from) as usize, 0);
            self.src_read(source, offset + from, &mut buf)?;
            let rel: Vec<BlockExtent> = extents[k..=j]
                .iter()
                .map(|e| BlockExtent {
                    start: e.start - from as u32,
                    end: e.end - from as u32,
                })
                .collect();
            let got = crate::format::vlblocks::sizes_from(&buf, &rel).map_err(|e| Error {
                block: e.block.map(|b| b + k as u64),
                ..e
            })?;
            sizes.extend(got);
            k = j + 1;
        }
        Ok(sizes)
    }

    fn verify_checksum(
        &self,
        source: &dyn Source,
        offset: u64,
        cbytes: u64,
        ck: &crate::index::ChunkChecksum,
    ) -> Result<()> {
        let dlen = crate::format::bloscpack::digest_len(ck.algo)? as u64;
        let data = crate::io::read_vec(source, offset, cbytes)?;
        let stored = crate::io::read_vec(source, ck.digest_offset, dlen)?;
        Stats::add(&self.env.stats.source_bytes_read, cbytes + dlen);
        crate::format::bloscpack::verify_checksum(ck.algo, &data, &stored)
    }

    fn src_read(&self, source: &dyn Source, offset: u64, buf: &mut [u8]) -> Result<()> {
        source.read_exact_at(offset, buf)?;
        Stats::add(&self.env.stats.source_bytes_read, buf.len() as u64);
        Ok(())
    }

    fn ctx(&self, ci: usize, layout: Arc<ChunkLayout>, src: u32, offset: u64) -> ChunkCtx {
        ChunkCtx {
            id: self.id,
            ci: ci as u64,
            layout,
            source: self.index.sources[src as usize].clone(),
            offset,
            env: self.env.clone(),
            src_end: self.src_end.clone(),
        }
    }

    /// Read bytes `a..a+out.len()` of chunk `ci`.
    fn read_chunk(&self, ci: usize, a: u64, out: &mut [u8]) -> Result<()> {
        let entry = &self.chunks()[ci];
        let (src, offset) = match &entry.loc {
            ChunkLoc::Special {
                kind,
                typesize,
                value,
            } => {
                decode::fill_special(*kind, *typesize as usize, value, a, out);
                Stats::add(&self.env.stats.special_bytes_served, out.len() as u64);
                return Ok(());
            }
            ChunkLoc::Stored { src, offset, .. } => (*src, *offset),
        };
        let layout = self.layout(ci)?;
        if let Some(kind) = layout.special {
            let h = &layout.header;
            decode::fill_special(kind, h.typesize as usize, &layout.value, a, out);
            Stats::add(&self.env.stats.special_bytes_served, out.len() as u64);
            return Ok(());
        }
        let ctx = self.ctx(ci, layout, src, offset);
        let l = &ctx.layout;
        let end = a + out.len() as u64;
        let first = l.block_at(a);
        let last = l.block_at(end - 1);
        // Is block `i` wholly inside the request (and decodable in place:
        // block 0 of a delta chunk is needed by the others, so it is cached)?
        let whole = |i: u32| {
            let s = l.block_start(i);
            s >= a && s + l.block_len(i) as u64 <= end && !(ctx.delta() && i == 0)
        };
        let mut block0: Option<Block> = None;
        let mut wrote = 0usize;
        let mut i = first;
        while i <= last {
            let bstart = l.block_start(i);
            let blen = l.block_len(i) as u64;
            let lo = a.max(bstart) - bstart;
            let hi = end.min(bstart + blen) - bstart;
            let n = (hi - lo) as usize;
            if !whole(i) {
                if ctx.read_part(i, lo as usize, &mut out[wrote..wrote + n])? {
                    wrote += n;
                    i += 1;
                    continue;
                }
                let block = ctx.cached_block(i)?;
                out[wrote..wrote + n].copy_from_slice(&block[lo as usize..hi as usize]);
                wrote += n;
                i += 1;
                continue;
            }
            if ctx.delta() && block0.is_none() {
                block0 = Some(ctx.cached_block(0)?);
            }
            let dst = &mut out[wrote..wrote + n];
            if ctx.take_ready(i, dst, block0.as_ref().map(|b| &b[..]))? {
                wrote += n;
                i += 1;
                continue;
            }
            // Decode in place; a run of adjacent whole blocks that nobody
            // else has is read with one positional read.
            let mut j = i;
            while j < last
                && whole(j + 1)
                && ctx.layout.extents[(j + 1) as usize].start == ctx.layout.extents[j as usize].end
                && ctx.missing(j + 1)
            {
                j += 1;
            }
            let run_len = (l.block_start(j) + l.block_len(j) as u64 - bstart) as usize;
            let b0 = block0.as_ref().map(|b| &b[..]);
            ctx.decode_run(i, j, b0, &mut out[wrote..wrote + run_len])?;
            wrote += run_len;
            i = j + 1;
        }
        Ok(())
    }
}

/// Index of the entry of `chunks` holding uncompressed byte `off` (< the
/// content's length).
fn chunk_at(chunks: &[ChunkEntry], off: u64) -> usize {
    chunks.partition_point(|c| c.uoff + c.ulen <= off)
}

/// The block shape of an N-dimensional array (`b2nd` metalayer, or its
/// older name `caterva`), if the container is one and it parses.
fn array_block_shape(info: &crate::index::Info) -> Option<Arc<[u64]>> {
    let meta = ["b2nd", "caterva"]
        .iter()
        .find_map(|name| info.metalayers.iter().find(|(n, _)| n == name))?;
    let m = crate::format::b2nd::parse(&meta.1).ok()?;
    Some(m.blockshape.into())
}

/// What decoding blocks of one stored chunk needs, without the container
/// (decode-ahead jobs carry one).
#[derive(Clone)]
struct ChunkCtx {
    id: u64,
    ci: u64,
    layout: Arc<ChunkLayout>,
    source: Arc<dyn Source>,
    offset: u64,
    env: Env,
    src_end: Arc<AtomicU64>,
}

impl ChunkCtx {
    fn key(&self, i: u32) -> BlockKey {
        (self.id, self.ci, i)
    }

    /// Does decoding a block other than 0 need decoded block 0?
    fn delta(&self) -> bool {
        self.layout.header.has_delta() && !self.layout.header.memcpyed()
    }

    /// Neither cached nor queued.
    fn missing(&self, i: u32) -> bool {
        let k = self.key(i);
        !self.env.cache.contains(&k) && self.env.ahead.lookup(&k).is_none()
    }

    /// Hand block `i` to the pool unless it is cached or queued already.
    /// False when the pool refuses (off or full).
    fn queue(&self, i: u32) -> bool {
        if !self.missing(i) {
            return true;
        }
        let key = self.key(i);
        let me = self.clone();
        // Not `cached_block`: the job must not wait for its own slot. Errors
        // are dropped: the reader decodes again and reports them.
        self.env.ahead.submit(
            key,
            Box::new(move || match me.env.cache.get(&key) {
                Some(b) => Some(b),
                None => me.decode_new(i).ok(),
            }),
        )
    }

    /// Fill `dst` (all of block `i`) from the cache or the pool, if either
    /// has it or the pool has not started it (then it is decoded here).
    /// A block consumed whole leaves the cache: the page cache has it now.
    fn take_ready(&self, i: u32, dst: &mut [u8], block0: Option<&[u8]>) -> Result<bool> {
        let key = self.key(i);
        let consume = |b: Block, dst: &mut [u8]| {
            dst.copy_from_slice(&b);
            self.env.cache.recycle(b);
            Stats::add(&self.env.stats.cache_hits, 1);
            Ok(true)
        };
        // The pool first, then the cache: a job puts its block in the cache
        // before it leaves the table, so no finished block is missed.
        if let Some(slot) = self.env.ahead.lookup(&key) {
            match self.env.ahead.claim(&slot) {
                Claim::Mine => {
                    let r = self.decode_run(i, i, block0, dst);
                    self.env.ahead.finish(key, &slot, None);
                    return r.map(|()| true);
                }
                Claim::Done(Some(b)) => {
                    drop(self.env.cache.take(&key));
                    return consume(b, dst);
                }
                Claim::Done(None) => {}
            }
        }
        match self.env.cache.take(&key) {
            Some(b) => consume(b, dst),
            None => Ok(false),
        }
    }

    /// Decode whole blocks `i..=j` (adjacent in the source) into `dst`.
    fn decode_run(&self, i: u32, j: u32, block0: Option<&[u8]>, dst: &mut [u8]) -> Result<()> {
        let l = &self.layout;
        let base = l.block_start(i);
        self.with_extents(i, j, |k, data| {
            let o = (l.block_start(k) - base) as usize;
            let d = &mut dst[o..o + l.block_len(k) as usize];
            decode::decode_block(l, k, data, block0, d)
        })
    }

    /// Read the stored bytes of blocks `i..=j` (adjacent in the source) with
    /// one positional read and hand each block's extent to `f`.
    fn with_extents(
        &self,
        i: u32,
        j: u32,
        mut f: impl FnMut(u32, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let l = &self.layout;
        let span_start = l.extents[i as usize].start as u64;
        let span_end = l.extents[j as usize].end as u64;
        let at = self.offset + span_start;
        let len = (span_end - span_start) as usize;
        READBUF.with(|rb| -> Result<()> {
            let mut rb = rb.borrow_mut();
            let (rb, direct) = self
                .source
                .read_span(at, len, self.access(at, len), &mut rb)?;
            Stats::add(&self.env.stats.source_bytes_read, len as u64);
            if direct {
                Stats::add(&self.env.stats.source_direct_reads, 1);
            }
            for k in i..=j {
                let e = l.extents[k as usize];
                let data = &rb
                    [(e.start as u64 - span_start) as usize..(e.end as u64 - span_start) as usize];
                f(k, data).map_err(|e| e.in_block(k as u64))?;
                Stats::add(&self.env.stats.blocks_decoded, 1);
            }
            Ok(())
        })
    }

    /// Fill `dst` with bytes `lo..` of block `i` and reply before the rest
    /// of the block is done, when that applies: `dst` is small (at most
    /// [`PART_MAX`] and a quarter of the block), the block is neither cached
    /// nor queued nor waiting in this thread's window already, its chunk's
    /// only filter is a byte shuffle, a reply can go first (`after` has a
    /// window open with room for the block), and the block is not above
    /// [`decode::BIG_BLOCK`]
    /// (those wait for their turn in `decode_block`, and this would unshuffle
    /// a second copy of it after the reply). Its streams are decoded, only
    /// `dst`'s bytes unshuffled, and unshuffling the whole block into the
    /// cache is left until the reply has gone. False when this does not
    /// apply (the caller decodes the block whole).
    fn read_part(&self, i: u32, lo: usize, dst: &mut [u8]) -> Result<bool> {
        let len = self.layout.block_len(i) as usize;
        if dst.len() > PART_MAX
            || dst.len() > len / 4
            || len > decode::BIG_BLOCK
            || !after::room(len)
            || after::pending(&self.key(i))
            || !self.missing(i)
        {
            return Ok(false);
        }
        let Some(ts) = decode::lone_shuffle(&self.layout.header) else {
            return Ok(false);
        };
        Stats::add(&self.env.stats.cache_misses, 1);
        let mut shuffled = PART.with(|p| std::mem::replace(&mut *p.borrow_mut(), BlockBuf::new(0)));
        decode::scratch(&mut shuffled, len);
        let l = &self.layout;
        self.with_extents(i, i, |k, data| {
            decode::decode_block_streams(l, k, data, &mut shuffled)
        })?;
        filter::shuffle::unshuffle_range(ts, &shuffled, lo, dst);
        let me = self.clone();
        let rest: after::Job = Box::new(move || {
            let mut out = me.buffer(len);
            filter::shuffle::unshuffle(ts, &shuffled, &mut out);
            me.env.cache.insert(me.key(i), Arc::new(out));
            if shuffled.capacity() <= decode::KEEP_SCRATCH {
                PART.with(|p| *p.borrow_mut() = shuffled);
            }
        });
        if let Err(rest) = after::defer(self.key(i), len, rest) {
            rest();
        }
        Ok(true)
    }

    /// May a block read of `len` bytes at source offset `at` bypass the
    /// page cache? Not when it continues a sequential scan (the kernel's
    /// read-ahead serves those), nor when it is small.
    fn access(&self, at: u64, len: usize) -> Access {
        if self.env.source_io != Access::Auto {
            return self.env.source_io;
        }
        let prev = self.src_end.swap(at + len as u64, Ordering::Relaxed);
        if len < MIN_DIRECT || at.abs_diff(prev) <= SEQ_WINDOW {
            Access::Buffered
        } else {
            Access::Auto
        }
    }

    /// Block `i`, from the cache, from the pool, or decoded into the cache.
    /// While it is decoded here, other readers of it wait for it (see
    /// `Ahead::start`) rather than decode it a second time.
    fn cached_block(&self, i: u32) -> Result<Block> {
        let key = self.key(i);
        loop {
            // The pool first, then the cache (see `take_ready`).
            if let Some(slot) = self.env.ahead.lookup(&key) {
                match self.env.ahead.claim(&slot) {
                    Claim::Mine => {
                        Stats::add(&self.env.stats.cache_misses, 1);
                        let r = self.decode_new(i);
                        self.env.ahead.finish(key, &slot, r.as_ref().ok().cloned());
                        return r;
                    }
                    Claim::Done(Some(b)) => {
                        Stats::add(&self.env.stats.cache_hits, 1);
                        return Ok(b);
                    }
                    Claim::Done(None) => {}
                }
            }
            if let Some(b) = self.env.cache.get(&key) {
                Stats::add(&self.env.stats.cache_hits, 1);
                return Ok(b);
            }
            // Someone else started it since: wait for theirs.
            let Some(started) = self.env.ahead.start(key) else {
                continue;
            };
            Stats::add(&self.env.stats.cache_misses, 1);
            let r = self.decode_new(i);
            started.finish(r.as_ref().ok().cloned());
            return r;
        }
    }

    fn decode_new(&self, i: u32) -> Result<Block> {
        let block0 = if i > 0 && self.delta() {
            Some(self.cached_block(0)?)
        } else {
            None
        };
        let mut out = self.buffer(self.layout.block_len(i) as usize);
        if let Err(e) = self.decode_run(i, i, block0.as_ref().map(|b| &b[..]), &mut out) {
            self.env.cache.put_spare(out);
            return Err(e);
        }
        let out = Arc::new(out);
        self.env.cache.insert(self.key(i), out.clone());
        Ok(out)
    }

    /// A buffer to decode a block into: a spare one (its pages are mapped)
    /// when there is one. When spares run low the pool maps a new one off
    /// the read path, so a cold read rarely pays a page fault per 4 KiB.
    fn buffer(&self, len: usize) -> BlockBuf {
        let (v, left) = self.env.cache.buffer(len);
        // A spare too big to be kept is not prepared (a block of a lying
        // size must not map its pages in advance).
        if left == 0 && self.env.cache.keeps_spare(len) {
            let cache = self.env.cache.clone();
            self.env.ahead.spawn(Box::new(move || {
                let mut v = BlockBuf::new(len);
                v.populate();
                cache.put_spare(v);
            }));
        }
        v
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        self.env.cache.forget_container(self.id);
    }
}
