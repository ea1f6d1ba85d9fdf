//! Bit (un)shuffle (TODO: being written).

use crate::error::{Error, Result};

/// Undo a bitshuffle of `src` (typesize `ts`) into `dst`. `version` is the
/// chunk format version (version 2 chunks only bitshuffled blocks whose
/// element count is a multiple of 8).
pub fn bitunshuffle(_ts: usize, _src: &[u8], _dst: &mut [u8], _version: u8) -> Result<()> {
    Err(Error::unsupported("bitshuffle not written yet"))
}
