//! Read Blosc1, Blosc2 and Bloscpack containers as plain bytes, decoding
//! only the blocks a read touches.

// A malformed file must give an error, never a panic: no `unwrap` outside
// the unit tests (the checked reads of `bytes` make them unnecessary). Here
// rather than in Cargo.toml, whose lint tables cannot tell tests apart.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod ahead;
pub(crate) mod bytes;
pub mod cache;
pub mod codec;
pub mod container;
pub mod decode;
pub mod deferred;
pub mod describe;
pub mod detect;
pub mod dtype;
pub mod error;
pub mod filter;
pub mod format;
pub mod index;
pub mod io;
pub mod longpath;
pub mod npy;
pub mod open;
pub mod report;
pub mod sizes;
pub mod srcdir;

pub use container::{Container, Env};
pub use deferred::Deferred;
pub use detect::{open_path, open_path_with};
pub use error::{Error, ErrorKind, Result};
