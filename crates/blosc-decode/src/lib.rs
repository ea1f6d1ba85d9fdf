//! Read Blosc1, Blosc2 and Bloscpack containers as plain bytes, decoding
//! only the blocks a read touches.

pub mod ahead;
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
pub mod npy;
pub mod open;
pub mod report;
pub mod sizes;
pub mod srcdir;

pub use container::{Container, Env};
pub use deferred::Deferred;
pub use detect::{open_path, open_path_with};
pub use error::{Error, ErrorKind, Result};
