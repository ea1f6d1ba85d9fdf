//! A chunk's header and block starts come in one read of its source: a
//! cold source (the page cache dropped) pays one disk round trip for them,
//! not two. The file is python-blosc2's (4.14: `SChunk(chunksize=65536,
//! data=np.random.default_rng(3).random(8192), cparams={codec: LZ4,
//! clevel: 1, typesize: 8, blocksize: 256})`): one chunk of 256 blocks,
//! 64 KiB stored, 1 KiB of block starts after its 32-byte header.

use blosc_decode::io::{FileSource, Source};
use blosc_decode::{open_source, Env, Result};

use std::path::Path;
use std::sync::{Arc, Mutex};

/// A file whose positional reads are counted.
struct Counted(FileSource, Mutex<Vec<(u64, usize)>>);

impl Source for Counted {
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.1.lock().unwrap().push((offset, buf.len()));
        self.0.read_exact_at(offset, buf)
    }
    fn path(&self) -> Option<&Path> {
        self.0.path()
    }
}

#[test]
fn a_chunk_layout_is_one_read_of_its_source() {
    let path = crate::common::root().join("tests/data/prefix-one-read.b2frame");
    let src = Arc::new(Counted(FileSource::open(&path).unwrap(), Mutex::default()));
    let c = open_source(src.clone(), &path, &Env::default())
        .unwrap()
        .unwrap();
    let l = c.layout(0).unwrap();
    assert_eq!(l.nblocks(), 256);
    // The chunk starts after the frame's 97-byte header; its header and
    // block starts are its first 32 + 4 * 256 bytes.
    let prefix = 97u64..97 + 32 + 4 * 256;
    let reads: Vec<_> = src
        .1
        .lock()
        .unwrap()
        .iter()
        .copied()
        .filter(|r| prefix.contains(&r.0))
        .collect();
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert!(
        reads[0].0 == 97 && reads[0].1 as u64 >= prefix.end - prefix.start,
        "{reads:?}"
    );
}
