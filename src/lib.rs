//! bloscfs: a read-only FUSE file system presenting Blosc containers as
//! plain files of their uncompressed bytes. The decoding is the
//! `blosc_decode` crate's; this crate is the command line, the mount and
//! the presented tree.

pub mod cli;
pub mod config;
pub mod fs;
pub mod fuse;
pub mod interrupts;
pub mod lifecycle;
pub mod local;
pub mod logging;
pub mod mount;
pub mod mount_table;
pub mod names;
pub mod options;
pub mod report;
