//! Container formats: pure parsing over byte slices, no I/O.

pub mod b2nd;
pub mod bloscpack;
pub mod chunk;
pub mod ctable;
pub mod embed;
pub mod frame;
pub mod msgpack;
pub mod packed;
pub mod proxy;
pub mod pylit;
pub mod tensor;
pub mod vlblocks;
pub mod zip;
