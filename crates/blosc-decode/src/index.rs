//! The format-neutral description of a container that every format's opener
//! produces: where each chunk lives and what it decodes to.

use crate::format::chunk::Special;
use crate::io::Source;
use std::sync::Arc;

/// Where a chunk's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkLoc {
    /// A Blosc chunk stored in `sources[src]` at `offset`, `cbytes` long
    /// (`cbytes` as known from the index; the chunk header is checked against it).
    Stored {
        /// Which of the index's sources holds it.
        src: u32,
        /// Where in that source it starts.
        offset: u64,
        /// Its compressed length.
        cbytes: u64,
    },
    /// A chunk encoded in the index itself (frame offsets with the special bit):
    /// nothing to read. `value` is the repeated value for `Special::Value`.
    Special {
        /// Which special value.
        kind: Special,
        /// The item size the value repeats at.
        typesize: u8,
        /// The repeated value (one item), for `Special::Value`.
        value: Box<[u8]>,
    },
}

/// One entry of a chunk table: a chunk, or a run of special chunks of one
/// kind (a frame may declare millions of them in a few bytes; a run costs
/// one entry, whatever its length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkEntry {
    /// The container's number for the (first) chunk of this entry: what
    /// messages and chunk tables call it.
    pub chunk: u64,
    /// Offset of the chunk's first byte in the uncompressed content.
    pub uoff: u64,
    /// Uncompressed length of the chunk (of the whole run).
    pub ulen: u64,
    /// Where its bytes are.
    pub loc: ChunkLoc,
    /// A checksum over the stored chunk bytes (Bloscpack), verified when the
    /// chunk is first read if verification is on.
    pub checksum: Option<ChunkChecksum>,
}

/// A stored checksum: algorithm id (Bloscpack numbering: 1 adler32, 2 crc32,
/// 3 md5, 4 sha1, 5 sha224, 6 sha256, 7 sha384, 8 sha512) and where the
/// digest is stored (same source as the chunk, read lazily; its length
/// follows from the algorithm).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkChecksum {
    /// The algorithm, by Bloscpack's numbering.
    pub algo: u8,
    /// Where the digest is stored in the chunk's source.
    pub digest_offset: u64,
}

/// What a container says of itself: format, codec, sizes, metalayers.
#[derive(Debug, Clone, Default)]
pub struct Info {
    /// e.g. "blosc2-frame", "blosc2-sframe", "bloscpack", "blosc1-chunk", "blosc2-chunk", "blosc2-packed".
    pub format: String,
    /// Format version of the container (frame version, bloscpack format version, chunk version).
    pub version: u32,
    /// Item size in bytes, for the filters.
    pub typesize: u32,
    /// Nominal chunk size; 0 when chunks vary in size.
    pub chunksize: u64,
    /// Number of chunks.
    pub nchunks: u64,
    /// Uncompressed bytes.
    pub nbytes: u64,
    /// Bytes on disk.
    pub cbytes: u64,
    /// Codec name as the container header says it (chunks may differ; see [`crate::Container::chunk_rows`]).
    pub codec: String,
    /// Filter names as the container header says them.
    pub filters: Vec<String>,
    /// Fixed-size metalayers (name, msgpack value bytes).
    pub metalayers: Vec<(String, Vec<u8>)>,
    /// Variable-length metalayers (name, decoded value bytes).
    pub vlmetalayers: Vec<(String, Vec<u8>)>,
    /// The header says there are variable-length metalayers, but they
    /// could not be read (`vlmetalayers` is then empty).
    pub vlmetalayers_unreadable: bool,
    /// Anything else worth showing (key, value).
    pub extra: Vec<(String, String)>,
}

impl Info {
    /// The compression ratio: uncompressed over stored bytes (0 when
    /// nothing is stored).
    pub fn ratio(&self) -> f64 {
        if self.cbytes > 0 {
            self.nbytes as f64 / self.cbytes as f64
        } else {
            0.0
        }
    }
}

/// A container, opened: its sources, chunk table and description.
pub struct Index {
    /// The files (or other sources) the chunks are read from.
    pub sources: Vec<Arc<dyn Source>>,
    /// Sorted by `uoff`, contiguous, covering `0..nbytes`.
    pub chunks: Vec<ChunkEntry>,
    /// What the container says about itself.
    pub info: Info,
    /// The entries' sizes come from a fixed chunk size, not from the chunks
    /// (a frame with a short last chunk): each stored chunk's size is
    /// checked against its own header before later entries are trusted.
    pub sizes_assumed: bool,
}

impl Index {
    /// Check the chunk table is contiguous and covers exactly `info.nbytes`.
    pub fn validate(&self) -> crate::Result<()> {
        let mut pos = 0u64;
        for (i, c) in self.chunks.iter().enumerate() {
            if c.uoff != pos {
                return Err(crate::Error::corrupt(format!(
                    "chunk {i} starts at uncompressed offset {} instead of {pos}",
                    c.uoff
                )));
            }
            if let ChunkLoc::Stored { src, .. } = c.loc {
                if src as usize >= self.sources.len() {
                    return Err(crate::Error::corrupt(format!(
                        "chunk {i} names a missing source"
                    )));
                }
            }
            pos = pos
                .checked_add(c.ulen)
                .ok_or_else(|| crate::Error::corrupt("uncompressed size overflows"))?;
        }
        if pos != self.info.nbytes {
            return Err(crate::Error::corrupt(format!(
                "chunks hold {pos} bytes but the container declares {}",
                self.info.nbytes
            )));
        }
        Ok(())
    }
}
