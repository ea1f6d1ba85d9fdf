//! Blosc filters, decode direction. Pure functions over caller buffers.
//!
//! ```
//! // Two 4-byte items shuffled: their first bytes, then their second...
//! let shuffled = [1, 5, 2, 6, 3, 7, 4, 8];
//! let mut items = [0; 8];
//! blosc_decode::filter::shuffle::unshuffle(4, &shuffled, &mut items);
//! assert_eq!(items, [1, 2, 3, 4, 5, 6, 7, 8]);
//! ```

pub mod bitshuffle;
pub mod bytedelta;
pub mod delta;
pub mod shuffle;
mod simd;

/// Detect the vector instruction set the kernels use now, not on the
/// first block filtered.
pub(crate) fn prepare() {
    simd::level();
}
