//! Bytedelta filter (TODO: being written).

use crate::error::{Error, Result};

/// Undo bytedelta (id 35) of `src` into `dst`, for typesize `ts`.
pub fn decode(_ts: usize, _src: &[u8], _dst: &mut [u8]) -> Result<()> {
    Err(Error::unsupported("bytedelta not written yet"))
}
