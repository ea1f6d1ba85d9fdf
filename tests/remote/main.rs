//! The daemon and the cli against remote sources: real servers on
//! 127.0.0.1 started by each test (moto for the S3 API, caterva2, the fault
//! server `scripts/servers/faulty.py`). Missing servers or FUSE fail the
//! tests when `CI` is set; elsewhere those tests are skipped with a message.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/servers.rs"]
mod servers;

mod counts;
mod faults;
mod harness;
mod interrupts;
mod listings;
mod lookups;
mod matrix;
mod names;
mod objects;
mod options;
mod redirects;
mod setup;
mod shards;
mod stalls;
mod tls;
mod trees;
mod zarr_counts;
mod zarr_gets;
