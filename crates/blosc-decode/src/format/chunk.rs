//! Blosc1 and Blosc2 chunk headers, block starts and dictionaries.
//!
//! Pure parsing over byte slices: nothing here reads a file. Every size taken
//! from a header is checked against the bytes at hand (and `MAX_CHUNK_NBYTES`)
//! before it is used to index or allocate.

use super::vlblocks::{self, VlBlocks};
use crate::bytes::{le_at, Reader};
pub use crate::codec::zfp::Mode as ZfpMode;
use crate::ensure;
use crate::error::{Error, Result};

/// Bytes of a Blosc1 chunk header.
pub const MIN_HEADER_LEN: usize = 16;
/// Bytes of a Blosc2 (extended) chunk header.
pub const EXTENDED_HEADER_LEN: usize = 32;
/// Blosc chunks are limited to 2 GiB by their int32 fields.
pub const MAX_CHUNK_NBYTES: u64 = i32::MAX as u64;
/// The largest typesize a header can hold.
pub const MAX_TYPESIZE: u8 = 255;
/// The largest block C-Blosc2 writes or reads (`BLOSC2_MAXBLOCKSIZE`): a
/// bigger one is a lying header, refused before any buffer is sized by it.
pub const MAX_BLOCKSIZE: u32 = 536_866_816;
/// A memcpyed chunk stores no block starts, so its block count comes from
/// the header alone; past this many blocks (8 MiB of extents) it is refused
/// rather than have 17 bytes of header drive a multi-GiB allocation.
/// C-Blosc2 writes 16 KiB blocks for memcpyed chunks unless told otherwise.
pub const MAX_MEMCPYED_BLOCKS: u32 = 1 << 20;

/// Flags byte (offset 2).
pub const FLAG_SHUFFLE: u8 = 0x01;
/// Stored as is, not compressed.
pub const FLAG_MEMCPYED: u8 = 0x02;
/// Bit-shuffled (Blosc1; with `FLAG_SHUFFLE`: Blosc2's filters apply).
pub const FLAG_BITSHUFFLE: u8 = 0x04;
/// Delta against block 0 (Blosc1).
pub const FLAG_DELTA: u8 = 0x08;
/// Blocks not split into one stream per byte of an item.
pub const FLAG_DONT_SPLIT: u8 = 0x10;

/// blosc2_flags byte (offset 31).
pub const B2_USE_DICT: u8 = 0x01;
/// Big-endian data.
pub const B2_BIG_ENDIAN: u8 = 0x02;
/// A lazy chunk (C-Blosc2 leaves its blocks in the frame it came from).
pub const B2_LAZY: u8 = 0x08;
/// Instrumented (C-Blosc2's codec statistics): unsupported.
pub const B2_INSTR: u8 = 0x80;

/// blosc2_flags2 byte (offset 30): variable-length blocks (format version 6),
/// where `blocksize` is a block count (see `vlblocks`).
pub const B2_VL_BLOCKS: u8 = 0x01;

/// Filter ids used in the Blosc2 pipeline.
pub mod filter_id {
    /// No filter.
    pub const NOFILTER: u8 = 0;
    /// Byte shuffle.
    pub const SHUFFLE: u8 = 1;
    /// Bit shuffle.
    pub const BITSHUFFLE: u8 = 2;
    /// Delta against block 0.
    pub const DELTA: u8 = 3;
    /// Truncated precision of floats.
    pub const TRUNC_PREC: u8 = 4;
    /// NDCELL (C-Blosc2 plugin): unsupported.
    pub const NDCELL: u8 = 32;
    /// NDMEAN (C-Blosc2 plugin): unsupported.
    pub const NDMEAN: u8 = 33;
    /// Bytedelta as C-Blosc2 before 2.8 wrote it.
    pub const BYTEDELTA_BUGGY: u8 = 34;
    /// Bytedelta.
    pub const BYTEDELTA: u8 = 35;
    /// Truncated precision of integers.
    pub const INT_TRUNC: u8 = 36;
}

/// The codec a chunk's streams were compressed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// BloscLZ.
    BloscLz,
    /// lz4 and lz4hc share a stream format (raw lz4 blocks).
    Lz4,
    /// Snappy.
    Snappy,
    /// zlib (deflate in a zlib wrapper).
    Zlib,
    /// Zstandard.
    Zstd,
    /// The C-Blosc2 ZFP plugin codecs (ids 33-35).
    Zfp(ZfpMode),
}

/// First id of the ZFP plugin codecs (`zfp_acc`; `zfp_prec` and `zfp_rate` follow).
pub const ZFP_ACC_ID: u8 = 33;

impl Codec {
    /// The codec's name as C-Blosc2 spells it.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Zfp(m) => m.name(),
            Codec::BloscLz => "blosclz",
            Codec::Lz4 => "lz4",
            Codec::Snappy => "snappy",
            Codec::Zlib => "zlib",
            Codec::Zstd => "zstd",
        }
    }
}

/// Whole-chunk special values (blosc2_flags bits 4-6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Special {
    /// All zeros.
    Zeros,
    /// All NaN (of the typesize's float).
    Nan,
    /// A value of `typesize` bytes repeated; it is stored right after the header.
    Value,
    /// Never written (read as zeros).
    Uninit,
}

impl Special {
    /// Reads as zero bytes (uninitialised chunks are served as zeros).
    pub fn is_zeros(self) -> bool {
        matches!(self, Special::Zeros | Special::Uninit)
    }

    /// The special kind of a header's code (bits 4-6 of `blosc2_flags`); unknown codes are an error.
    pub fn from_code(code: u8) -> Result<Option<Special>> {
        Ok(match code {
            0 => None,
            1 => Some(Special::Zeros),
            2 => Some(Special::Nan),
            3 => Some(Special::Value),
            4 => Some(Special::Uninit),
            n => {
                return Err(Error::unsupported(format!(
                    "unknown special-value kind {n}"
                )))
            }
        })
    }
    /// Its name in messages and `info`.
    pub fn name(self) -> &'static str {
        match self {
            Special::Zeros => "zeros",
            Special::Nan => "nan",
            Special::Value => "repeated value",
            Special::Uninit => "uninitialized",
        }
    }
}

/// A Blosc1 or Blosc2 chunk header, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Format version.
    pub version: u8,
    /// The codec's format version.
    pub versionlz: u8,
    /// Flags (`FLAG_*`, codec in bits 5-7).
    pub flags: u8,
    /// Bytes of one item.
    pub typesize: u8,
    /// Uncompressed bytes.
    pub nbytes: u32,
    /// Uncompressed bytes of one block (VL blocks: the block count).
    pub blocksize: u32,
    /// Compressed bytes, header included.
    pub cbytes: u32,
    /// 16 (Blosc1 layout) or 32 (Blosc2 extended header).
    pub header_len: usize,
    /// Filter pipeline, one id per slot (`filter_id`).
    pub filters: [u8; 6],
    /// Each filter's meta byte.
    pub filters_meta: [u8; 6],
    /// User-defined codec id.
    pub udcodec: u8,
    /// The codec's meta byte.
    pub compcode_meta: u8,
    /// Blosc2 flags (`B2_*`; special kind in bits 4-6).
    pub blosc2_flags: u8,
    /// More Blosc2 flags (`B2_VL_BLOCKS`).
    pub blosc2_flags2: u8,
}

impl ChunkHeader {
    /// Parse a header from the first bytes of a chunk (16 bytes, or 32 when
    /// the flags announce the extended header).
    pub fn parse(b: &[u8]) -> Result<ChunkHeader> {
        ensure!(
            b.len() >= MIN_HEADER_LEN,
            truncated,
            "chunk header needs 16 bytes, got {}",
            b.len()
        );
        let version = b[0];
        ensure!(
            (1..=6).contains(&version),
            corrupt,
            "not a Blosc chunk: unknown format version {version}"
        );
        let flags = b[2];
        let typesize = b[3];
        let mut r = Reader::at(b, 4, "chunk header");
        let nbytes: u32 = r.le()?;
        let blocksize: u32 = r.le()?;
        let cbytes: u32 = r.le()?;
        ensure!(
            nbytes as u64 <= MAX_CHUNK_NBYTES,
            corrupt,
            "chunk nbytes {nbytes} exceeds the 2 GiB limit"
        );
        ensure!(
            (cbytes as u64) <= MAX_CHUNK_NBYTES,
            corrupt,
            "chunk cbytes {cbytes} exceeds the 2 GiB limit"
        );
        ensure!(typesize > 0, corrupt, "chunk typesize is 0");
        let extended = version >= 3
            && flags & (FLAG_SHUFFLE | FLAG_BITSHUFFLE) == (FLAG_SHUFFLE | FLAG_BITSHUFFLE);
        let mut h = ChunkHeader {
            version,
            versionlz: b[1],
            flags,
            typesize,
            nbytes,
            blocksize,
            cbytes,
            header_len: MIN_HEADER_LEN,
            filters: [0; 6],
            filters_meta: [0; 6],
            udcodec: 0,
            compcode_meta: 0,
            blosc2_flags: 0,
            blosc2_flags2: 0,
        };
        if extended {
            h.read_extended(b)?;
        } else {
            h.set_blosc1_filters();
        }
        h.check_sizes()?;
        Ok(h)
    }

    /// The second 16 bytes of a Blosc2 extended header: the filter pipeline,
    /// the user codec and the Blosc2 flags.
    fn read_extended(&mut self, b: &[u8]) -> Result<()> {
        ensure!(
            b.len() >= EXTENDED_HEADER_LEN,
            truncated,
            "extended chunk header needs 32 bytes, got {}",
            b.len()
        );
        self.header_len = EXTENDED_HEADER_LEN;
        self.filters.copy_from_slice(&b[16..22]);
        self.udcodec = b[22];
        self.compcode_meta = b[23];
        self.filters_meta.copy_from_slice(&b[24..30]);
        self.blosc2_flags = b[31];
        self.blosc2_flags2 = b[30];
        if self.vl_blocks() {
            // As C-Blosc2 refuses them.
            ensure!(
                !self.memcpyed(),
                corrupt,
                "a VL-block chunk cannot be memcpyed (flags {:#04x})",
                self.flags
            );
            ensure!(
                self.special()?.is_none(),
                corrupt,
                "a VL-block chunk cannot hold a special value (blosc2_flags {:#04x})",
                self.blosc2_flags
            );
        }
        Ok(())
    }

    /// The pipeline of a 16-byte header: Blosc1 flags describe at most
    /// shuffle/bitshuffle and delta.
    fn set_blosc1_filters(&mut self) {
        if self.flags & FLAG_SHUFFLE != 0 {
            self.filters[5] = filter_id::SHUFFLE;
        } else if self.flags & FLAG_BITSHUFFLE != 0 {
            self.filters[5] = filter_id::BITSHUFFLE;
        }
        if self.flags & FLAG_DELTA != 0 && self.version >= 3 {
            self.filters[4] = filter_id::DELTA;
        }
    }

    /// The sizes that must agree once the header is read.
    fn check_sizes(&self) -> Result<()> {
        ensure!(
            (self.cbytes as usize) >= self.header_len,
            corrupt,
            "chunk cbytes {} is smaller than its {}-byte header",
            self.cbytes,
            self.header_len
        );
        if self.special()?.is_none() && self.nbytes > 0 {
            ensure!(self.blocksize > 0, corrupt, "chunk blocksize is 0");
            ensure!(
                self.blocksize <= MAX_BLOCKSIZE,
                corrupt,
                "chunk blocksize {} exceeds the format's maximum of {MAX_BLOCKSIZE}",
                self.blocksize
            );
        }
        Ok(())
    }

    /// A Blosc2 extended (32-byte) header?
    pub fn is_extended(&self) -> bool {
        self.header_len == EXTENDED_HEADER_LEN
    }
    /// Stored as is (`FLAG_MEMCPYED`)?
    pub fn memcpyed(&self) -> bool {
        self.flags & FLAG_MEMCPYED != 0
    }
    /// Blocks not split into streams (`FLAG_DONT_SPLIT`)?
    pub fn dont_split(&self) -> bool {
        self.flags & FLAG_DONT_SPLIT != 0
    }
    /// Compressed with a dictionary (`B2_USE_DICT`)?
    pub fn uses_dict(&self) -> bool {
        self.blosc2_flags & B2_USE_DICT != 0
    }
    /// Variable-length blocks: `blocksize` is the number of blocks, and each
    /// block's size is in its stream (see `ChunkLayout::block_len`).
    pub fn vl_blocks(&self) -> bool {
        self.blosc2_flags2 & B2_VL_BLOCKS != 0
    }
    /// The size of the blocks (the last may be shorter); `None` when they
    /// vary (VL blocks).
    pub fn fixed_blocksize(&self) -> Option<u32> {
        (!self.vl_blocks()).then_some(self.blocksize)
    }
    /// A lazy chunk (`B2_LAZY`)?
    pub fn is_lazy(&self) -> bool {
        self.blosc2_flags & B2_LAZY != 0
    }
    /// The chunk's special kind, if it is one.
    pub fn special(&self) -> Result<Option<Special>> {
        if !self.is_extended() {
            return Ok(None);
        }
        Special::from_code((self.blosc2_flags >> 4) & 0x07)
    }
    /// The compressor id in the flags (bits 5-7).
    pub fn compformat(&self) -> u8 {
        self.flags >> 5
    }
    /// The codec its streams were compressed with.
    pub fn codec(&self) -> Result<Codec> {
        Ok(match self.compformat() {
            0 => Codec::BloscLz,
            1 => Codec::Lz4,
            2 if self.version <= 2 => Codec::Snappy,
            3 => Codec::Zlib,
            4 => Codec::Zstd,
            6 if (ZFP_ACC_ID..ZFP_ACC_ID + 3).contains(&self.udcodec) => {
                Codec::Zfp(match self.udcodec - ZFP_ACC_ID {
                    0 => ZfpMode::Accuracy,
                    1 => ZfpMode::Precision,
                    _ => ZfpMode::Rate,
                })
            }
            6 => {
                return Err(Error::unsupported(format!(
                    "unsupported codec {} (user-defined or plugin codec)",
                    self.udcodec
                )))
            }
            n => return Err(Error::unsupported(format!("unsupported codec format {n}"))),
        })
    }
    /// Number of blocks (0 for an empty chunk).
    pub fn nblocks(&self) -> u32 {
        if self.nbytes == 0 || self.blocksize == 0 {
            return 0;
        }
        if self.vl_blocks() {
            return self.blocksize;
        }
        self.nbytes.div_ceil(self.blocksize)
    }
    /// Uncompressed size of block `i` of a chunk of fixed-size blocks (a
    /// VL-block chunk's are in its layout).
    fn fixed_block_len(&self, i: u32) -> u32 {
        let start = i as u64 * self.blocksize as u64;
        (self.nbytes as u64 - start).min(self.blocksize as u64) as u32
    }
    /// Number of streams block `i` is stored in.
    pub fn nstreams(&self, i: u32) -> u32 {
        if self.vl_blocks() {
            return 1;
        }
        let leftover = self.fixed_block_len(i) < self.blocksize;
        if self.dont_split() || leftover {
            return 1;
        }
        if self.version <= 2 {
            // C-Blosc1 also required these before the don't-split flag existed.
            let ts = self.typesize as u32;
            if ts > 16 || self.blocksize / ts < 128 {
                return 1;
            }
        }
        self.typesize as u32
    }
    /// Filters in decode order (slot 5 down to 0), skipping no-ops.
    pub fn decode_filters(&self) -> impl Iterator<Item = (u8, u8)> + '_ {
        (0..6)
            .rev()
            .map(move |i| (self.filters[i], self.filters_meta[i]))
            .filter(|&(f, _)| f != filter_id::NOFILTER)
    }
    /// Is delta one of its filters?
    pub fn has_delta(&self) -> bool {
        self.filters.contains(&filter_id::DELTA)
    }
    /// Length of the prefix holding header, bstarts (for non-memcpyed, non-special
    /// chunks) and, when present, the dictionary size field. The dictionary bytes
    /// themselves follow; see `ChunkLayout::parse`.
    pub fn bstarts_end(&self) -> Result<usize> {
        if self.memcpyed() || self.special()?.is_some() {
            return Ok(self.header_len);
        }
        let n = self.nblocks() as usize;
        let end = self.header_len + 4 * n;
        ensure!(
            end <= self.cbytes as usize,
            corrupt,
            "{} block starts do not fit in a chunk of {} bytes",
            n,
            self.cbytes
        );
        Ok(end)
    }
}

/// Where block `i`'s streams lie inside the chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockExtent {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

/// The parsed metadata of a chunk: header, the extent of each block's
/// streams, and the dictionary. This is all that is needed to decode any one
/// block given just that block's bytes.
#[derive(Debug, Clone)]
pub struct ChunkLayout {
    /// Its header.
    pub header: ChunkHeader,
    /// Its special kind, if the whole chunk is one.
    pub special: Option<Special>,
    /// Where each block's streams lie.
    pub extents: Vec<BlockExtent>,
    /// The dictionary, if the chunk has one.
    pub dict: Option<Vec<u8>>,
    /// The repeated value of a `Special::Value` chunk (`typesize` bytes).
    pub value: Vec<u8>,
    /// Bytes of the chunk needed to build this layout (header, bstarts, dict).
    pub prefix_len: usize,
    /// The block sizes of a VL-block chunk.
    pub vl: Option<VlBlocks>,
    /// The array's block shape (its `b2nd` metalayer), which the ZFP codecs
    /// need and the chunk does not hold: set by the container, `None` from
    /// `parse`.
    pub block_shape: Option<std::sync::Arc<[u64]>>,
}

impl ChunkLayout {
    /// How many bytes from the chunk start `parse` needs, given the header:
    /// may need to be called twice when a dictionary is present (first to
    /// learn the dictionary size, then with it).
    pub fn prefix_needed(header: &ChunkHeader, prefix: &[u8]) -> Result<usize> {
        let mut need = header.bstarts_end()?;
        if let Some(Special::Value) = header.special()? {
            need = header.header_len + header.typesize as usize;
        }
        if header.uses_dict() && !header.memcpyed() && header.special()?.is_none() {
            need += 4;
            if let Some(dsize) = le_at::<u32>(prefix, need - 4) {
                let dsize = dsize as usize;
                ensure!(
                    need as u64 + dsize as u64 <= header.cbytes as u64,
                    corrupt,
                    "dictionary of {dsize} bytes does not fit in the chunk"
                );
                need += dsize;
            }
        }
        ensure!(
            need <= header.cbytes as usize,
            corrupt,
            "chunk metadata ({need} bytes) exceeds cbytes {}",
            header.cbytes
        );
        Ok(need)
    }

    /// Parse the layout from the chunk prefix (at least `prefix_needed` bytes;
    /// all of a VL-block chunk, whose block sizes are in its streams).
    pub fn parse(prefix: &[u8]) -> Result<ChunkLayout> {
        Self::parse_with(prefix, |extents| vlblocks::sizes_from(prefix, extents))
    }

    /// Parse the layout from the chunk prefix (at least `prefix_needed`
    /// bytes); for a VL-block chunk, `vl_sizes` reads the size field at the
    /// start of each extent given (in block order).
    pub fn parse_with(
        prefix: &[u8],
        vl_sizes: impl FnOnce(&[BlockExtent]) -> Result<Vec<i32>>,
    ) -> Result<ChunkLayout> {
        let header = ChunkHeader::parse(prefix)?;
        let need = Self::prefix_needed(&header, prefix)?;
        let need = Self::prefix_needed(&header, &prefix[..need.min(prefix.len())])?;
        ensure!(
            prefix.len() >= need,
            truncated,
            "chunk metadata needs {need} bytes, got {}",
            prefix.len()
        );
        let special = header.special()?;
        let mut value = Vec::new();
        if special == Some(Special::Value) {
            value =
                prefix[header.header_len..header.header_len + header.typesize as usize].to_vec();
        }
        let (extents, dict) = if special.is_some() || header.nbytes == 0 {
            (Vec::new(), None) // no blocks to read
        } else if header.memcpyed() {
            (memcpyed_extents(&header)?, None)
        } else {
            stored_extents(&header, prefix)?
        };
        let vl = if header.vl_blocks() && !extents.is_empty() {
            Some(vl_blocks(&header, &extents, vl_sizes)?)
        } else {
            None
        };
        Ok(ChunkLayout {
            header,
            special,
            extents,
            dict,
            value,
            prefix_len: need,
            vl,
            block_shape: None,
        })
    }

    /// Number of blocks.
    pub fn nblocks(&self) -> u32 {
        self.header.nblocks()
    }

    /// Uncompressed size of block `i`.
    pub fn block_len(&self, i: u32) -> u32 {
        match &self.vl {
            Some(v) => v.len(i),
            None => self.header.fixed_block_len(i),
        }
    }

    /// Where block `i` starts in the chunk's uncompressed content.
    pub fn block_start(&self, i: u32) -> u64 {
        match &self.vl {
            Some(v) => v.start(i) as u64,
            None => i as u64 * self.header.blocksize as u64,
        }
    }

    /// The block holding byte `off` of the chunk's uncompressed content.
    pub fn block_at(&self, off: u64) -> u32 {
        match &self.vl {
            Some(v) => v.block_at(off),
            None => (off / self.header.blocksize as u64) as u32,
        }
    }
}

mod extents;
use extents::{memcpyed_extents, stored_extents, vl_blocks};
