//! bloscfs: read Blosc1/Blosc2/Bloscpack containers as plain bytes, decoding
//! only the blocks a read touches.

pub mod codec;
pub mod decode;
pub mod error;
pub mod filter;
pub mod format;
pub mod index;
pub mod io;

pub use error::{Error, ErrorKind, Result};
