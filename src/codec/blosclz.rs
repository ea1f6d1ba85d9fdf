//! BloscLZ decoder (TODO: being written).

use crate::error::{Error, Result};

/// Decompress one BloscLZ stream into `dst`, returning the bytes written.
pub fn decompress(_src: &[u8], _dst: &mut [u8]) -> Result<usize> {
    Err(Error::unsupported("blosclz decoder not written yet"))
}
