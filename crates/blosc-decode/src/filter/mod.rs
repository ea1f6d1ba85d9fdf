//! Blosc filters, decode direction. Pure functions over caller buffers.

pub mod bitshuffle;
pub mod bytedelta;
pub mod delta;
pub mod shuffle;
mod simd;
