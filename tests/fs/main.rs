//! The daemon's tests without a mount, one binary: the presented tree
//! through `bloscfs::fs::Fs` (listings, attributes, reads, sizes, `.npy`
//! of every writer's dtypes) and the command line (`bloscfs cat`/`info`).

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod ctable;
mod docs;
mod fs;
mod fs_sizes;
mod npy_writers;
mod proxy_caches;
mod saved_kinds;
mod source_io;
mod source_tree;
mod spares;
mod stores;
mod zarr;
mod zarr_attrs;
mod zarr_shard;
