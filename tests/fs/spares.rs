//! Opening a container has spare block buffers of its block size mapped
//! off the read path (the runner's spare thread), so that the first blocks
//! a read hands to the runner are decoded into mapped pages.

use crate::common::*;
use bloscfs::fs::{Fs, FsOptions, ROOT_INO};
use std::ffi::OsStr;
use std::time::{Duration, Instant};

#[test]
fn an_open_container_gets_spare_buffers_of_its_block_size() {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("b2nd/array1-2d.b2nd"), d.path().join("grid.b2nd")).unwrap();
    let fs = Fs::new(d.path(), &FsOptions::default()).unwrap();
    let g = fs.lookup(ROOT_INO, OsStr::new("grid.npy")).unwrap();
    let (fh, _) = fs.open(g.ino, false).unwrap();
    let c = blosc_decode::open_path(&d.path().join("grid.b2nd"))
        .unwrap()
        .unwrap();
    let len = c.first_layout().unwrap().block_len(0) as usize;
    let cache = &fs.env().cache;
    // The spare thread runs when a CPU is idle: wait for it (a test that
    // fails waits this long).
    let until = Instant::now() + Duration::from_secs(30);
    while cache.spare_room(len) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(cache.spare_room(len), 0, "no spare of {len} bytes made");
    // What the next decode takes is one of them.
    let (b, left) = cache.buffer(len);
    assert!(b.capacity() >= len && left >= 1);
    fs.release(fh);
}
