//! Where an array's chunks and metadata come from.

use crate::{Error, Result};
use blosc_decode::io::{self, Access, FileSource, First, Source};
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An array's directory: its files by key (`/`-separated, relative).
pub trait ChunkStore: Send + Sync {
    /// The file stored at `key`, for positional reads (a part of a shard,
    /// the blocks of a Blosc chunk); `Ok(None)` if there is none. Its
    /// reader reads `first` first: a store over a network fetches that
    /// with the open.
    fn open(&self, key: &str, first: First) -> Result<Option<Arc<dyn Source>>>;

    /// The bytes stored at `key`; `Ok(None)` if there is none. A file
    /// longer than `max` bytes is an error (nothing is allocated for it).
    fn get(&self, key: &str, max: u64) -> Result<Option<Vec<u8>>> {
        match self.open(key, First::Head(max))? {
            Some(src) => {
                let read = read_bounded(src.as_ref(), max, key);
                match src.path() {
                    Some(p) => read.map_err(|e| e.in_file(p)),
                    None => read,
                }
                .map(Some)
            }
            None => Ok(None),
        }
    }
}

thread_local! {
    /// This thread's buffer for a chunk's encoded bytes ([`with_bounded`]).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The longest buffer [`with_bounded`] keeps for the thread's next chunk
/// (the decoder's own scratch buffers are kept up to the same size): the
/// encoded bytes of a 4 MiB chunk, and not much memory outside the cache's
/// budget per thread.
const SCRATCH_KEPT: usize = 4 << 20;

/// `f` given all of `src`, if it is at most `max` bytes long (as
/// [`read_bounded`]): the bytes a source holds in memory already (a remote
/// chunk's fetched bytes), else read into a buffer the thread keeps for
/// its next chunk (no allocation, zeroing or page faults per chunk).
pub fn with_bounded<T>(
    src: &dyn Source,
    max: u64,
    what: &str,
    f: impl FnOnce(&[u8]) -> Result<T>,
) -> Result<T> {
    let n = bounded_len(src, max, what)?;
    let mut v = SCRATCH.with(RefCell::take);
    let r = src
        .read_span(0, n, Access::Buffered, &mut v)
        .and_then(|(span, _)| f(&span));
    if v.len() <= SCRATCH_KEPT {
        SCRATCH.with(|c| *c.borrow_mut() = v);
    }
    r
}

/// The length of `src`, if it is at most `max` bytes.
fn bounded_len(src: &dyn Source, max: u64, what: &str) -> Result<usize> {
    match usize::try_from(src.len()) {
        Ok(n) if src.len() <= max => Ok(n),
        _ => Err(Error::corrupt(format!(
            "{what}: {} bytes, more than the {max} it may hold",
            src.len()
        ))),
    }
}

/// All of `src`, if it is at most `max` bytes long.
pub fn read_bounded(src: &dyn Source, max: u64, what: &str) -> Result<Vec<u8>> {
    bounded_len(src, max, what)?;
    io::read_vec(src, 0, src.len())
}

/// A local directory.
pub struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    pub fn new(dir: &Path) -> DirStore {
        DirStore {
            dir: dir.to_path_buf(),
        }
    }
}

impl ChunkStore for DirStore {
    fn open(&self, key: &str, _first: First) -> Result<Option<Arc<dyn Source>>> {
        let path = self.dir.join(key);
        let (file, md) = match io::open_regular(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::from(e).in_file(&path)),
        };
        Ok(Some(Arc::new(FileSource::opened(file, &md, &path))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blosc_decode::io::MemSource;

    /// The thread keeps the buffer of a chunk of up to 4 MiB for the next
    /// one, not a larger one's; a source longer than allowed is refused
    /// before anything is read.
    #[test]
    fn only_a_small_chunk_s_buffer_is_kept() {
        let kept = || SCRATCH.with(|c| c.borrow().len());
        let read = |n: usize| {
            let src = MemSource::new(vec![7u8; n]);
            with_bounded(
                &src,
                8 << 20,
                "chunk",
                |b| Ok(b.len() == n && b[n - 1] == 7),
            )
        };
        assert!(read(5 << 20).unwrap());
        assert_eq!(kept(), 0);
        assert!(read(1 << 20).unwrap());
        assert_eq!(kept(), 1 << 20);
        assert!(read(100).unwrap(), "a shorter chunk in a longer buffer");
        assert_eq!(kept(), 1 << 20);
        let e = with_bounded(&MemSource::new(vec![0u8; 10]), 9, "chunk", |_| Ok(())).unwrap_err();
        assert!(e.reason.contains("more than the 9"), "{e}");
    }
}
