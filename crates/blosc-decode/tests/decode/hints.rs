//! What a container tells its source ahead of reading (`will_need`): a cold
//! source then waits for the disk once for the chunk starts a read needs,
//! not once per chunk. The file is python-blosc2's
//! (`blocks-lz4.b2frame`: 4 chunks of 1 MiB, blocks of 64 KiB, LZ4).

use blosc_decode::detect::{hint_offsets, probe_source};
use blosc_decode::io::{FileSource, Source};
use blosc_decode::{open_source, Env, Result};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What a source was asked, in order.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Asked {
    Read(u64, usize),
    Hint(u64, u64),
}

/// A file that records its positional reads and the hints it is given.
struct Recorded(FileSource, Mutex<Vec<Asked>>);

impl Source for Recorded {
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.1.lock().unwrap().push(Asked::Read(offset, buf.len()));
        self.0.read_exact_at(offset, buf)
    }
    fn path(&self) -> Option<&Path> {
        self.0.path()
    }
    fn will_need(&self, offset: u64, len: u64) {
        self.1.lock().unwrap().push(Asked::Hint(offset, len));
    }
}

fn frame() -> PathBuf {
    crate::common::fixture("frame/blocks-lz4.b2frame")
}

fn recorded(path: &Path) -> Arc<Recorded> {
    Arc::new(Recorded(FileSource::open(path).unwrap(), Mutex::default()))
}

fn take(src: &Recorded) -> Vec<Asked> {
    std::mem::take(&mut *src.1.lock().unwrap())
}

/// Where each chunk of `c` (all stored) starts in its source.
pub(crate) fn chunk_starts(c: &blosc_decode::Container) -> Vec<u64> {
    c.chunks()
        .iter()
        .map(|e| match e.loc {
            blosc_decode::index::ChunkLoc::Stored { offset, .. } => offset,
            _ => panic!("a special chunk"),
        })
        .collect()
}

/// The stored extent of each chunk: where it starts and where the next one
/// (or the offsets index) does.
fn extents(path: &Path) -> Vec<(u64, u64)> {
    let c = open_source(recorded(path), path, &Env::default())
        .unwrap()
        .unwrap();
    let starts = chunk_starts(&c);
    let h = blosc_decode::open::frame::read_header(&FileSource::open(path).unwrap()).unwrap();
    let mut ends: Vec<u64> = starts[1..].to_vec();
    ends.push(h.header_len + h.cbytes);
    starts.into_iter().zip(ends).collect()
}

fn hinted(asked: &[Asked], at: u64) -> bool {
    asked
        .iter()
        .any(|a| matches!(*a, Asked::Hint(o, n) if o <= at && at < o + n))
}

/// A frame probed (a lookup) has its offsets index read ahead: the open
/// that follows finds it in the page cache.
#[test]
fn probing_a_frame_hints_its_offsets_index() {
    let path = frame();
    let src = recorded(&path);
    let p = probe_source(src.clone(), &path).unwrap().unwrap();
    assert_eq!(p.len, 3153728);
    assert!(
        take(&src).iter().all(|a| matches!(a, Asked::Read(..))),
        "the probe alone hints nothing"
    );
    hint_offsets(src.as_ref(), &p);
    let h = blosc_decode::open::frame::read_header(&FileSource::open(&path).unwrap()).unwrap();
    let index_at = h.header_len + h.cbytes;
    let asked = take(&src);
    assert!(
        asked.contains(&Asked::Hint(index_at, src.len() - index_at)),
        "{asked:?}"
    );
    assert!(
        asked.iter().all(|a| matches!(a, Asked::Hint(..))),
        "the hint reads the header again: {asked:?}"
    );
    // Hinted, not read: the header is read again, nothing else.
    assert!(
        asked
            .iter()
            .all(|a| !matches!(a, Asked::Read(o, _) if *o >= index_at)),
        "{asked:?}"
    );
}

/// A read across two chunks never parsed hints both chunks' starts before
/// it reads anything. A read that continues it hints nothing, nor does a
/// read inside one chunk never parsed (it reads its start first anyway).
#[test]
fn a_read_across_cold_chunks_hints_their_starts_first() {
    let path = frame();
    let ext = extents(&path);
    let src = recorded(&path);
    let c = open_source(src.clone(), &path, &Env::default())
        .unwrap()
        .unwrap();
    take(&src);
    let mut buf = vec![0u8; 1 << 20];
    assert_eq!(c.read_at(3 << 19, &mut buf).unwrap(), buf.len());
    let asked = take(&src);
    let first_read = asked
        .iter()
        .position(|a| matches!(a, Asked::Read(..)))
        .unwrap();
    let hints = &asked[..first_read];
    for &(start, _) in &ext[1..3] {
        assert!(
            hinted(hints, start),
            "chunk at {start} not hinted: {asked:?}"
        );
    }
    // Chunks 0 and 3 are not touched.
    assert!(
        !hinted(hints, ext[0].0) && !hinted(hints, ext[3].0),
        "{ext:?} {asked:?}"
    );

    assert_eq!(c.read_at(5 << 19, &mut buf).unwrap(), 3153728 - (5 << 19));
    let asked = take(&src);
    assert!(
        asked.iter().all(|a| matches!(a, Asked::Read(..))),
        "{asked:?}"
    );

    let c = open_source(src.clone(), &path, &Env::default())
        .unwrap()
        .unwrap();
    take(&src);
    assert_eq!(c.read_at(5 << 19, &mut buf[..4096]).unwrap(), 4096);
    let asked = take(&src);
    assert!(
        asked.iter().all(|a| matches!(a, Asked::Read(..))),
        "{asked:?}"
    );
}
