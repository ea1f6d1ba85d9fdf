//! What a container tells its source ahead of reading (`will_need`): a
//! cold source then waits for the disk once for the chunk
//! starts a read needs, not once per chunk, and a plane's reader does not
//! wait for its blocks one disk read after another. The files are
//! python-blosc2's (`blocks-lz4.b2frame`: 4 chunks of 1 MiB, blocks of
//! 64 KiB, LZ4; `planes3d-4x256x256-b1x64x256.b2nd`: planes of 256 KiB).

use blosc_decode::ahead::{Job, JobKind, Runner};
use blosc_decode::detect::{hint_offsets, probe_source};
use blosc_decode::io::{FileSource, Source};
use blosc_decode::{open_source, Deferred, Env, Result, Stream};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What a source was asked, in order.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Asked {
    Read(u64, usize),
    Hint(u64, u64),
    Join(u64, u64),
}

/// A file that records its positional reads and the hints it is given;
/// it joins reads (`will_read`) as a remote source does when its flag is
/// set.
struct Recorded(FileSource, Mutex<Vec<Asked>>, bool);

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
    fn will_read(&self, offset: u64, len: u64) {
        self.1.lock().unwrap().push(Asked::Join(offset, len));
    }
    fn joins_reads(&self) -> bool {
        self.2
    }
}

/// A runner that runs each job at once, on the thread that hands it over:
/// what a job does is done when the read that started it returns.
struct Inline;

impl Runner for Inline {
    fn workers(&self) -> usize {
        1
    }
    fn run(&self, _kind: JobKind, job: Job) -> bool {
        job();
        true
    }
}

fn frame() -> PathBuf {
    crate::common::fixture("frame/blocks-lz4.b2frame")
}

fn recorded(path: &Path) -> Arc<Recorded> {
    Arc::new(Recorded(
        FileSource::open(path).unwrap(),
        Mutex::default(),
        false,
    ))
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
/// it reads anything. A read that continues it hints no chunk start, nor does a
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
        asked.iter().all(|a| !matches!(a, Asked::Hint(..))),
        "{asked:?}"
    );

    let c = open_source(src.clone(), &path, &Env::default())
        .unwrap()
        .unwrap();
    take(&src);
    assert_eq!(c.read_at(5 << 19, &mut buf[..4096]).unwrap(), 4096);
    let asked = take(&src);
    assert!(
        asked.iter().all(|a| !matches!(a, Asked::Hint(..))),
        "{asked:?}"
    );
}

/// The `will_need` spans asked for after the last read of `asked`.
fn hinted_after_reads(asked: &[Asked]) -> Vec<(u64, u64)> {
    let from = asked
        .iter()
        .rposition(|a| matches!(a, Asked::Read(..)))
        .map_or(0, |i| i + 1);
    asked[from..]
        .iter()
        .filter_map(|a| match *a {
            Asked::Hint(o, n) => Some((o, n)),
            _ => None,
        })
        .collect()
}

/// A read of 128 KiB that jumps into plane 1 (its faulting page, the one
/// at its middle, holds the plane's start) has the stored blocks of the
/// windows after it, up to the plane's end, hinted once it is served: the
/// blocks the rest of the plane is read from, in the chunk the read parsed.
/// A small read, a read whose plane ends inside it, and a read that
/// continues the one before hint nothing after their reads.
#[test]
fn a_large_read_into_a_plane_hints_the_blocks_of_the_rest_of_the_plane() {
    let path = crate::common::fixture("writers/narrow/planes3d-4x256x256-b1x64x256.b2nd");
    // Hint jobs run at once, on the reading thread.
    let env = Env::with_runner(64 << 20, Arc::new(Inline));
    let open = || {
        let src = recorded(&path);
        let c = open_source(src.clone(), &path, &env).unwrap().unwrap();
        take(&src);
        (src, Arc::new(c))
    };
    let (src, c) = open();
    assert_eq!(c.len(), 4096 + (1 << 20), "the .npy view");
    let (hl, plane) = (c.len() - (1 << 20), 256u64 << 10);
    let mut buf = vec![0u8; 128 << 10];
    let read = |c: &Arc<blosc_decode::Container>, s: &Stream, at: u64, buf: &mut [u8]| {
        c.read_shared(s, at, buf, &mut Deferred::none()).unwrap();
    };
    // Plane 1 starts at `hl + plane`, in the page at the read's middle.
    let at = (hl + plane) / 4096 * 4096 - (64 << 10);
    let s = Stream::new();
    read(&c, &s, at, &mut buf);
    let spans = hinted_after_reads(&take(&src));
    assert_eq!(spans.len(), 1, "one span, in chunk 0: {spans:?}");
    let (lo, n) = spans[0];
    // The rest of plane 1 (the end of chunk 0), read on as the kernel
    // would, reads only inside that span.
    let mut end = at + buf.len() as u64;
    while end < hl + 2 * plane {
        let k = (hl + 2 * plane - end).min(buf.len() as u64) as usize;
        read(&c, &s, end, &mut buf[..k]);
        end += k as u64;
    }
    let reads: Vec<(u64, usize)> = take(&src)
        .into_iter()
        .filter_map(|a| match a {
            Asked::Read(o, k) => Some((o, k)),
            _ => None,
        })
        .collect();
    assert!(!reads.is_empty(), "the rest of the plane was read");
    for (o, k) in reads {
        assert!(
            lo <= o && o + k as u64 <= lo + n,
            "a read of {k} at {o} outside the hinted {lo}+{n}"
        );
    }
    // A small read (plane 3), a read whose plane (0) ends inside it.
    for (at, len) in [
        (hl + 3 * plane + 100, 16 << 10),
        (hl + plane - (96 << 10), 128 << 10),
    ] {
        let (src, c) = open();
        read(&c, &Stream::new(), at, &mut buf[..len]);
        let asked = take(&src);
        assert!(asked.iter().any(|a| matches!(a, Asked::Read(..))), "cold");
        assert!(
            hinted_after_reads(&asked).is_empty(),
            "{at}+{len}: {asked:?}"
        );
    }
    // A read that continues the one before, into plane 1.
    let (src, c) = open();
    let s = Stream::new();
    read(&c, &s, at - buf.len() as u64, &mut buf);
    take(&src);
    read(&c, &s, at, &mut buf);
    let asked = take(&src);
    assert!(asked.iter().any(|a| matches!(a, Asked::Read(..))), "cold");
    assert!(hinted_after_reads(&asked).is_empty(), "{asked:?}");
}

/// A request over several cold blocks of a chunk tells a source that joins
/// reads (a remote one) their stored bytes at once, before it reads them;
/// a local file is told nothing.
#[test]
fn a_multi_block_read_announces_its_blocks_to_a_source_that_joins_reads() {
    let path = frame();
    let (start, end) = extents(&path)[1];
    for joins in [true, false] {
        let src = Arc::new(Recorded(
            FileSource::open(&path).unwrap(),
            Mutex::default(),
            joins,
        ));
        let c = open_source(src.clone(), &path, &Env::default())
            .unwrap()
            .unwrap();
        take(&src);
        // Blocks 4..8 of chunk 1 (64 KiB each).
        let mut buf = vec![0u8; 256 << 10];
        c.read_at((1 << 20) + (256 << 10), &mut buf).unwrap();
        let asked = take(&src);
        let joined: Vec<(usize, u64, u64)> = (asked.iter().enumerate())
            .filter_map(|(k, a)| match *a {
                Asked::Join(o, n) => Some((k, o, n)),
                _ => None,
            })
            .collect();
        if !joins {
            assert!(joined.is_empty(), "{asked:?}");
            continue;
        }
        assert_eq!(joined.len(), 1, "{asked:?}");
        let (at, o, n) = joined[0];
        assert!(start < o && o + n <= end, "{o}+{n} outside chunk 1");
        let blocks: Vec<(usize, u64, usize)> = (asked.iter().enumerate())
            .filter_map(|(k, a)| match *a {
                Asked::Read(ro, rn) if ro >= o => Some((k, ro, rn)),
                _ => None,
            })
            .collect();
        assert!(!blocks.is_empty(), "{asked:?}");
        for (k, ro, rn) in blocks {
            assert!(k > at && ro + rn as u64 <= o + n, "{asked:?}");
        }
    }
}
