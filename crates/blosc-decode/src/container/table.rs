//! The chunk table and the chunks' layouts: which chunk holds a raw offset,
//! where the index only assumes chunk sizes the check of them, and each
//! stored chunk's header and block extents, read on first use.

use super::Container;
use crate::cache::Stats;
use crate::ensure;
use crate::error::{Error, Result};
use crate::format::chunk::{BlockExtent, ChunkHeader, ChunkLayout, EXTENDED_HEADER_LEN};
use crate::index::{ChunkChecksum, ChunkEntry, ChunkLoc, Info};
use crate::io::Source;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Bytes of a chunk's first read (see `read_prefix`).
const PREFIX_FIRST: u64 = 4096;

/// Index of the entry of `chunks` holding uncompressed byte `off` (< the
/// content's length).
pub(super) fn chunk_at(chunks: &[ChunkEntry], off: u64) -> usize {
    chunks.partition_point(|c| c.uoff + c.ulen <= off)
}

/// The block shape of an N-dimensional array (`b2nd` metalayer, or its
/// older name `caterva`), if the container is one and it parses.
pub(super) fn array_block_shape(info: &Info) -> Option<Arc<[u64]>> {
    let meta = ["b2nd", "caterva"]
        .iter()
        .find_map(|name| info.metalayers.iter().find(|(n, _)| n == name))?;
    let m = crate::format::b2nd::parse(&meta.1).ok()?;
    Some(m.blockshape.into())
}

impl Container {
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
    pub(super) fn table_to(&self, from: u64, end: u64) -> Result<&[ChunkEntry]> {
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

    /// The parsed layout of stored chunk `ci`, if it was read already.
    pub(super) fn loaded_layout(&self, ci: usize) -> Option<&Arc<ChunkLayout>> {
        self.layouts[ci].get()
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
        let source = self.index.sources[src as usize].as_ref();
        if self.env.verify_checksums {
            if let Some(ck) = &entry.checksum {
                self.verify_checksum(source, offset, cbytes, ck)?;
            }
        }
        // The index may only bound the chunk (sparse frames record a
        // placeholder so chunk files need not be opened with the frame): the
        // source's real length bounds it too, before any size is trusted.
        let cbytes = cbytes.min(source.len().saturating_sub(offset));
        let prefix = self.read_prefix(source, offset, cbytes)?;
        let mut layout = ChunkLayout::parse_with(&prefix, |extents| {
            self.read_vl_sizes(source, offset, extents)
        })?;
        layout.block_shape = self.block_shape.clone();
        let layout = Arc::new(layout);
        if self.layouts[ci].set(layout.clone()).is_ok() {
            self.parsed.fetch_add(1, Ordering::Relaxed);
        }
        Ok(layout)
    }

    /// The start of the chunk at `offset` (at most `cbytes` long) that its
    /// layout is parsed from: header, block starts and dictionary (and
    /// what else the first read brought).
    /// The first read of a chunk of more than four pages takes a page, not
    /// only the header: the block starts that follow it (2 KiB for
    /// python-blosc2's 512 blocks) come with it, one read of a cold source
    /// (one disk round trip), not two. (A smaller chunk is read as before:
    /// a page would be much of it, read again with its blocks.)
    fn read_prefix(&self, source: &dyn Source, offset: u64, cbytes: u64) -> Result<Vec<u8>> {
        let first = match cbytes > 4 * PREFIX_FIRST {
            true => PREFIX_FIRST,
            false => EXTENDED_HEADER_LEN as u64,
        };
        let head_len = first.min(cbytes) as usize;
        let mut prefix = vec![0u8; head_len];
        self.src_read(source, offset, &mut prefix)?;
        let header = ChunkHeader::parse(&prefix)?;
        ensure!(
            header.cbytes as u64 <= cbytes,
            corrupt,
            "chunk header says {} compressed bytes but only {cbytes} are available",
            header.cbytes
        );
        let mut need = ChunkLayout::prefix_needed(&header, &prefix)?;
        loop {
            if prefix.len() < need {
                let old = prefix.len();
                prefix.resize(need, 0);
                self.src_read(source, offset + old as u64, &mut prefix[old..])?;
            }
            let again = ChunkLayout::prefix_needed(&header, &prefix)?;
            if again <= prefix.len() {
                return Ok(prefix);
            }
            need = again;
        }
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
        ck: &ChunkChecksum,
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
}
