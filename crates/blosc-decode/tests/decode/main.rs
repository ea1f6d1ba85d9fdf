//! The library's integration tests, one binary (each test binary links the
//! whole library): every reference producer's files read back bit for bit,
//! frames and their indexes, damaged and hostile input, the `.npy` view,
//! variable-length blocks and ZFP. The fixtures are the workspace's
//! (`tests/fixtures`, `tests/data`); `BLOSCFS_FIXTURES` adds more.
//! `regress.rs` is a binary of its own: it measures the process's memory.

#[path = "../../../../tests/common/fixtures.rs"]
mod common;

mod ahead;
mod container;
mod corrupt;
mod frame;
mod frame_sizes;
mod hints;
mod npy_reads;
mod prefix;
mod reference;
mod vlblocks;
mod zfp;
