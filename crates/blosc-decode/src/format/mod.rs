//! Container formats: pure parsing over byte slices, no I/O. Every size a
//! header declares is checked before anything is sized by it.
//!
//! ```
//! use blosc_decode::format::chunk::{ChunkHeader, Codec};
//!
//! let mut head = vec![2, 1, 0x02, 4]; // a memcpyed Blosc1 chunk of 4-byte items
//! head.extend(8u32.to_le_bytes()); // uncompressed bytes
//! head.extend(8u32.to_le_bytes()); // block size
//! head.extend(24u32.to_le_bytes()); // compressed bytes
//! let h = ChunkHeader::parse(&head)?;
//! assert!(h.memcpyed());
//! assert_eq!((h.typesize, h.nbytes, h.nblocks()), (4, 8, 1));
//! assert_eq!(h.codec()?, Codec::BloscLz);
//! # Ok::<(), blosc_decode::Error>(())
//! ```

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
