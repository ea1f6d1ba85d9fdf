//! Container formats: pure parsing over byte slices, no I/O.

pub mod chunk;
