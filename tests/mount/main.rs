//! The daemon's tests on real mounts, one binary: reads through the
//! kernel, the mount's lifetime, deep paths and what a mount refuses. They
//! need /dev/fuse and fusermount3: in CI (CI set) their absence fails the
//! tests; elsewhere those tests are skipped with a message.

#[path = "../common/mod.rs"]
mod common;

mod ahead;
mod coldrows;
mod lifecycle;
mod longpath;
mod mount;
mod proxy;
mod security;
mod stores;
mod uring;
mod zarr;
mod zarr_attrs;
