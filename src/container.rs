//! `Container`: an opened Blosc container, serving any byte range of its
//! uncompressed content by decoding only the blocks that range touches.
//!
//! The read path: binary search the chunk table for the chunks a range
//! covers; for each, the parsed chunk layout (header, block extents,
//! dictionary — read once, lazily, the "lazy chunk" idea) says where each
//! block's streams are; blocks are taken from the shared LRU cache or read
//! and decoded. Blocks wholly inside the request are decoded straight into
//! the caller's buffer.

use crate::cache::{BlockCache, Stats};
use crate::decode;
use crate::ensure;
use crate::error::{Error, Result};
use crate::format::chunk::{ChunkHeader, ChunkLayout, EXTENDED_HEADER_LEN};
use crate::index::{ChunkEntry, ChunkLoc, Index, Info};
use crate::io::Source;
use crate::npy::NdLayout;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// What containers share: the block cache, the counters, and options.
#[derive(Clone)]
pub struct Env {
    pub cache: Arc<BlockCache>,
    pub stats: Arc<Stats>,
    /// Verify stored chunk checksums (Bloscpack) on first read of each chunk.
    pub verify_checksums: bool,
}

impl Env {
    pub fn new(cache_bytes: u64) -> Self {
        Env {
            cache: Arc::new(BlockCache::new(cache_bytes)),
            stats: Arc::new(Stats::default()),
            verify_checksums: true,
        }
    }
}

impl Default for Env {
    fn default() -> Self {
        Env::new(256 << 20)
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static READBUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

pub struct Container {
    id: u64,
    path: PathBuf,
    index: Index,
    layouts: Vec<OnceLock<Arc<ChunkLayout>>>,
    env: Env,
    view: View,
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

impl Container {
    pub fn new(path: &Path, index: Index, env: Env) -> Result<Container> {
        index.validate().map_err(|e| e.in_file(path))?;
        let n = index.chunks.len();
        Ok(Container {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            path: path.to_path_buf(),
            index,
            layouts: (0..n).map(|_| OnceLock::new()).collect(),
            env,
            view: View::Raw,
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
        if let Some(Ok(l)) = first.map(|ci| self.layout(ci)) {
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
        match &self.view {
            View::Raw => self.raw_len(),
            View::Npy {
                header,
                nd: Some(nd),
                ..
            } => header.len() as u64 + nd.data_len(),
            View::Npy {
                header, nd: None, ..
            } => header.len() as u64 + self.raw_len(),
        }
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
    pub fn chunks(&self) -> &[ChunkEntry] {
        &self.index.chunks
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

    /// Index of the chunk holding uncompressed byte `off` (< len).
    fn chunk_at(&self, off: u64) -> usize {
        self.index
            .chunks
            .partition_point(|c| c.uoff + c.ulen <= off)
    }

    /// Fill `buf` from offset `offset` of the presented file. Returns the
    /// bytes written: `buf.len()` unless the range runs past the end.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
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
            Some(nd) => {
                // Element-aligned window covering the request.
                let is = nd.itemsize;
                let e0 = data_off / is;
                let e1 = (data_off + out.len() as u64).div_ceil(is);
                let skip = (data_off - e0 * is) as usize;
                let mut pos = 0usize; // bytes of `out` filled
                let mut first = true;
                let mut tmp = Vec::new();
                // Runs adjacent in the raw content are merged into one read.
                let mut pending: Option<(u64, u64)> = None;
                let mut flush =
                    |raw: u64, k: u64, pos: &mut usize, first: &mut bool| -> Result<()> {
                        let bytes = (k * is) as usize;
                        let (from, take) = if *first {
                            (skip, (bytes - skip).min(out.len() - *pos))
                        } else {
                            (0, bytes.min(out.len() - *pos))
                        };
                        *first = false;
                        if from == 0 {
                            let got = self.read_raw_at(raw, &mut out[*pos..*pos + take])?;
                            ensure!(got == take, truncated, "array chunk data is short");
                        } else {
                            tmp.resize(from + take, 0);
                            let got = self.read_raw_at(raw, &mut tmp)?;
                            ensure!(got == tmp.len(), truncated, "array chunk data is short");
                            out[*pos..*pos + take].copy_from_slice(&tmp[from..]);
                        }
                        *pos += take;
                        Ok(())
                    };
                nd.for_each_run(e0, e1 - e0, |raw, k| {
                    match pending {
                        Some((r, n)) if r + n * is == raw => pending = Some((r, n + k)),
                        Some((r, n)) => {
                            flush(r, n, &mut pos, &mut first)?;
                            pending = Some((raw, k));
                        }
                        None => pending = Some((raw, k)),
                    }
                    Ok(())
                })?;
                if let Some((r, n)) = pending {
                    flush(r, n, &mut pos, &mut first)?;
                }
            }
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
        let mut done = 0usize;
        let mut ci = self.chunk_at(offset);
        while done < want {
            let entry = &self.index.chunks[ci];
            let pos = offset + done as u64;
            let a = pos - entry.uoff;
            let n = ((entry.ulen - a) as usize).min(want - done);
            self.read_chunk(ci, a, &mut buf[done..done + n])
                .map_err(|e| e.in_chunk(ci as u64).in_file(&self.path))?;
            done += n;
            ci += 1;
        }
        Stats::add(&self.env.stats.bytes_served, done as u64);
        Ok(done)
    }

    /// The parsed layout of stored chunk `ci`, read on first use.
    pub fn layout(&self, ci: usize) -> Result<Arc<ChunkLayout>> {
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
        ensure!(
            header.nbytes as u64 == entry.ulen,
            corrupt,
            "chunk holds {} bytes but the container expects {}",
            header.nbytes,
            entry.ulen
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
        let layout = Arc::new(ChunkLayout::parse(&prefix)?);
        let _ = self.layouts[ci].set(layout.clone());
        Ok(layout)
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

    /// Read bytes `a..a+out.len()` of chunk `ci`.
    fn read_chunk(&self, ci: usize, a: u64, out: &mut [u8]) -> Result<()> {
        let entry = &self.index.chunks[ci];
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
        let h = &layout.header;
        if let Some(kind) = layout.special {
            decode::fill_special(kind, h.typesize as usize, &layout.value, a, out);
            Stats::add(&self.env.stats.special_bytes_served, out.len() as u64);
            return Ok(());
        }
        let source = self.index.sources[src as usize].clone();
        let bs = h.blocksize as u64;
        let first = (a / bs) as u32;
        let last = ((a + out.len() as u64 - 1) / bs) as u32;
        // Blocks wholly inside the request are decoded in place; partial ones
        // go through the cache.
        let mut block0: Option<Arc<[u8]>> = None;
        if h.has_delta() && !h.memcpyed() && (first > 0 || last > 0) {
            block0 = Some(self.cached_block(ci, &layout, source.as_ref(), offset, 0)?);
        }
        let mut wrote = 0usize;
        let mut i = first;
        while i <= last {
            let bstart = i as u64 * bs;
            let blen = h.block_len(i) as u64;
            let lo = a.max(bstart) - bstart;
            let hi = (a + out.len() as u64).min(bstart + blen) - bstart;
            let n = (hi - lo) as usize;
            let dst = &mut out[wrote..wrote + n];
            if lo == 0 && hi == blen && !(h.has_delta() && i == 0) {
                // Whole block: find the run of whole blocks and read their
                // streams with one positional read when they are adjacent.
                let mut j = i;
                while j < last
                    && (j + 1) as u64 * bs + h.block_len(j + 1) as u64 <= a + out.len() as u64
                    && layout.extents[(j + 1) as usize].start == layout.extents[j as usize].end
                {
                    j += 1;
                }
                let span_start = layout.extents[i as usize].start as u64;
                let span_end = layout.extents[j as usize].end as u64;
                let run_len = ((j - i) as u64 * bs + h.block_len(j) as u64) as usize;
                let dst = &mut out[wrote..wrote + run_len];
                READBUF.with(|rb| -> Result<()> {
                    let mut rb = rb.borrow_mut();
                    rb.resize((span_end - span_start) as usize, 0);
                    self.src_read(source.as_ref(), offset + span_start, &mut rb)?;
                    for k in i..=j {
                        let e = layout.extents[k as usize];
                        let data = &rb[(e.start as u64 - span_start) as usize
                            ..(e.end as u64 - span_start) as usize];
                        let o = ((k - i) as u64 * bs) as usize;
                        let d = &mut dst[o..o + h.block_len(k) as usize];
                        decode::decode_block(&layout, k, data, block0.as_deref(), d)
                            .map_err(|e| e.in_block(k as u64))?;
                        Stats::add(&self.env.stats.blocks_decoded, 1);
                    }
                    Ok(())
                })?;
                wrote += run_len;
                i = j + 1;
                continue;
            }
            let block = self.cached_block(ci, &layout, source.as_ref(), offset, i)?;
            dst.copy_from_slice(&block[lo as usize..hi as usize]);
            wrote += n;
            i += 1;
        }
        Ok(())
    }

    /// Block `i` of stored chunk `ci`, from the cache or decoded into it.
    fn cached_block(
        &self,
        ci: usize,
        layout: &ChunkLayout,
        source: &dyn Source,
        offset: u64,
        i: u32,
    ) -> Result<Arc<[u8]>> {
        let key = (self.id, ci as u64, i);
        if let Some(b) = self.env.cache.get(&key) {
            Stats::add(&self.env.stats.cache_hits, 1);
            return Ok(b);
        }
        Stats::add(&self.env.stats.cache_misses, 1);
        let block0 = if i > 0 && layout.header.has_delta() && !layout.header.memcpyed() {
            Some(self.cached_block(ci, layout, source, offset, 0)?)
        } else {
            None
        };
        let e = layout.extents[i as usize];
        let mut out = vec![0u8; layout.header.block_len(i) as usize];
        READBUF.with(|rb| -> Result<()> {
            let mut rb = rb.borrow_mut();
            rb.resize((e.end - e.start) as usize, 0);
            self.src_read(source, offset + e.start as u64, &mut rb)?;
            decode::decode_block(layout, i, &rb, block0.as_deref(), &mut out)
                .map_err(|e| e.in_block(i as u64))
        })?;
        Stats::add(&self.env.stats.blocks_decoded, 1);
        let out: Arc<[u8]> = out.into();
        self.env.cache.insert(key, out.clone());
        Ok(out)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        self.env.cache.forget_container(self.id);
    }
}
