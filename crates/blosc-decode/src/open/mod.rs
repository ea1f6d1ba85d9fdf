//! Openers: read a container's headers and index through a `Source` and
//! produce the format-neutral `Index`.

pub mod bloscpack;
pub mod embed;
pub mod frame;
pub mod packed;
pub mod store;
