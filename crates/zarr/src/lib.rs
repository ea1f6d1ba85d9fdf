//! Zarr arrays (v2 `.zarray`, v3 `zarr.json`, sharded or not) read as the
//! byte ranges of their values in C order, optionally behind a `.npy`
//! header.
//!
//! - [`meta`]: the metadata, parsed by hand over `serde_json` and
//!   validated (shape, chunk shape, data type, fill value, chunk keys,
//!   codecs); anything not understood is an `Unsupported` error naming it.
//! - [`codec`]: the codec pipeline of one chunk (blosc through
//!   blosc-decode's own decoder, zstd, gzip, zlib, lz4, bytes, crc32c),
//!   each step's output size known in advance and checked.
//! - [`consolidated`]: a group's consolidated metadata (v2 `.zmetadata`,
//!   v3 `consolidated_metadata`), every array below it described at once.
//! - [`attrs`]: an array's attributes as extended attributes.
//! - [`grid`]: the regular chunk grid and chunk keys.
//! - [`array`]: [`ZarrArray`], a read of `[off, off + len)` fetching and
//!   decoding only the chunks it touches, through a [`ChunkStore`].
//! - `ahead`: the chunks a read touches past the first decoded meanwhile
//!   on the runner of blosc-decode's `Env`, each once.
//! - [`chunks`]: how one chunk is read and kept: a chunk whose pipeline is
//!   Blosc alone as a blosc-decode container (only the blocks a read
//!   touches are decoded), any other decoded whole; both kept in the
//!   byte-bounded cache of blosc-decode's `Env`.
//! - [`shard`]: inner chunks of sharded arrays, found through each
//!   shard's index (read once and kept) as windows of the shard file.
//! - [`store`]: where chunks come from ([`ChunkStore`]); [`DirStore`], a
//!   local directory read through blosc-decode's `Source`.

mod ahead;
pub mod array;
pub mod attrs;
pub mod chunks;
pub mod codec;
pub mod consolidated;
mod crc32c;
mod filters;
pub mod grid;
pub mod meta;
pub mod shard;
pub mod store;

pub use array::ZarrArray;
pub use blosc_decode::{Error, ErrorKind, Result};
pub use meta::{ArrayMeta, DataType, Filter};
pub use store::{ChunkStore, DirStore};

/// The metadata file of a v2 array.
pub const ZARRAY: &str = ".zarray";
/// The metadata file of a v3 node.
pub const ZARR_JSON: &str = "zarr.json";
