//! Read Blosc1, Blosc2 and Bloscpack containers as plain bytes, decoding
//! only the blocks a read touches.
//!
//! A [`Container`] is any Blosc container opened: a Blosc1 or Blosc2 chunk,
//! a Blosc2 frame (contiguous, or sparse: a directory), a b2nd array
//! (presented as a `.npy` file), a Bloscpack file. [`open_path`] detects
//! the kind by content; [`open_source`] opens one from any [`Source`] of
//! bytes (a local file, memory, or a source of your own). Reads decode the
//! blocks they touch into a cache shared by the containers of an [`Env`]
//! and bounded in bytes; [`Container::info`] says what the container is.
//!
//! ```
//! use blosc_decode::{io::MemSource, open_source, Env};
//! use std::sync::Arc;
//!
//! # fn main() -> blosc_decode::Result<()> {
//! // A Blosc1 chunk holding its data as is (memcpyed), written out by hand.
//! let data = b"hello, blosc";
//! let n = data.len() as u32;
//! let mut chunk = vec![2, 1, 0x02, 1]; // version, codec version, flags, typesize
//! chunk.extend(n.to_le_bytes()); // uncompressed bytes
//! chunk.extend(n.to_le_bytes()); // block size
//! chunk.extend((16 + n).to_le_bytes()); // compressed bytes
//! chunk.extend(data);
//!
//! let src = Arc::new(MemSource::new(chunk));
//! let c = open_source(src, "hello.blosc".as_ref(), &Env::default())?.expect("a chunk");
//! let mut out = vec![0; c.len() as usize];
//! c.read_at(0, &mut out)?;
//! assert_eq!(out, data);
//! assert_eq!(c.info().nbytes, 12);
//! # Ok(())
//! # }
//! ```
//!
//! A file, or a sparse frame's directory, opened by its path (the sparse
//! frame's files by [`open::LocalFrame`]; a daemon with rules of its own
//! for opening them implements [`open::FrameFiles`]):
//!
//! ```
//! # fn main() -> blosc_decode::Result<()> {
//! // A Blosc2 frame python-blosc2 wrote (the repository's test fixtures).
//! let path = std::path::Path::new("../../tests/fixtures/frame/lz4-none-ts4-c.b2frame");
//! let c = blosc_decode::open_path(path)?.expect("a container");
//! assert_eq!(c.info().format, "blosc2-frame");
//! let mut tail = vec![0; 100];
//! let n = c.read_at(c.len() - 10, &mut tail)?; // reads stop at the end
//! assert_eq!(n, 10);
//! # Ok(())
//! # }
//! ```
//!
//! Errors ([`Error`]) name the file, chunk and block that failed and why; a
//! malformed or truncated input is an error, never a panic.
//!
//! The library starts no thread. Every block is decoded by the read that
//! needs it unless the caller gives the [`Env`] a [`Runner`]
//! ([`Env::with_runner`]): then spans are decoded ahead of sequential
//! readers ([`DecodeAhead`]) and the blocks of a scattered read in
//! parallel, on the runner's threads (the bloscfs daemon's is the
//! `bloscfs-pool` crate).
//!
//! Below the containers, the layers are public for decoders of other
//! containers: [`format`](mod@format) (parsers over bytes), [`decode`] (one block or a
//! whole chunk), [`codec`], [`filter`], [`dtype`] and [`npy`].

// A malformed file must give an error, never a panic: no `unwrap` outside
// the unit tests (the checked reads of `bytes` make them unnecessary). Here
// rather than in Cargo.toml, whose lint tables cannot tell tests apart.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![deny(missing_docs)]

// Opening containers, reading them, and what they say about themselves.
pub mod cache;
pub mod container;
pub mod deferred;
pub mod detect;
pub mod error;
pub mod index;
pub mod io;
pub mod open;
pub mod summary;

// Decoding ahead: the runner a caller may give, and how far ahead.
pub mod ahead;

// The layers below a container, for a decoder of other containers (the
// Zarr crate decodes Blosc chunks with them) and for tests and fuzzing:
// the format parsers, one block's decode, the codecs and filters, NumPy
// dtypes and `.npy` headers.
pub mod codec;
pub mod decode;
pub mod dtype;
pub mod filter;
pub mod format;
pub mod npy;

pub(crate) mod bytes;
pub(crate) mod describe;
pub(crate) mod sizes;

pub use ahead::policy::DecodeAhead;
pub use ahead::Runner;
pub use container::{Container, Env, Served, Stream};
pub use deferred::Deferred;
pub use detect::{probe_path, Probe};
pub use error::{Error, ErrorKind, Result};
pub use io::Source;
pub use open::{open_path, open_path_with, open_source};
