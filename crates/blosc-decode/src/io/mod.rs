//! The one I/O trait: positional reads from a source of bytes.
//!
//! Parsing code never touches files; containers hold `Arc<dyn Source>` and ask
//! for exactly the byte ranges they need. Positional reads (not mmap) mean a
//! source truncated underneath us gives an error, never `SIGBUS`.
//!
//! Block reads go through [`Source::read_span`], told by the container how
//! they may use the page cache ([`Access`]). [`FileSource`] always reads
//! through it; a source of the caller's may bypass it for a cold random
//! read (the bloscfs daemon's reads with `O_DIRECT`: the kernel then
//! neither fills page-cache pages nor copies out of them, and the read
//! costs about the disk's time alone).

use crate::error::{errno_of, Error, Result};
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

mod file;
mod lazy;
#[cfg(test)]
mod tests;
mod window;

pub use file::{checked_regular, open_regular, regular_options, set_blocking, FileSource, Stamp};
pub use lazy::{ByPath, LazyFile, Opener};
pub use window::Window;

/// The size of a memory page in bytes (4096 if the system does not say).
pub fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    // SAFETY: sysconf only reads a configuration value.
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as u64,
        _ => 4096,
    })
}

/// The errno of the last failed system call on this thread (`EIO` if none
/// is known), for a filesystem reply.
pub fn last_errno() -> i32 {
    errno_of(&std::io::Error::last_os_error())
}

/// What a reader of a file opened by name reads of it first: a source that
/// fetches over a network may fetch it with the open, in the same request
/// (a Zarr chunk read whole, a Blosc chunk's header, a shard's index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum First {
    /// Its first bytes, up to this many.
    Head(u64),
    /// Its last bytes, this many (or all of a shorter file).
    Tail(u64),
}

/// How a block read may use the kernel's page cache ([`crate::Env`]'s
/// `source_io`; a container turns `Auto` into `Buffered` for reads that
/// continue a sequential scan). A hint to [`Source::read_span`]: a source
/// that cannot bypass the page cache reads through it whatever it says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Access {
    /// Through the page cache (sequential reads: the kernel reads ahead).
    Buffered,
    /// Bypass the page cache (`O_DIRECT`) if the range is not (mostly) in it
    /// already.
    #[default]
    Auto,
    /// Bypass the page cache whenever the file system allows it (tests;
    /// sources on slow random-access storage).
    Direct,
}

impl Access {
    /// The option's value: `auto`, `buffered` or `direct`.
    pub fn parse(s: &str) -> Option<Access> {
        match s {
            "auto" => Some(Access::Auto),
            "buffered" => Some(Access::Buffered),
            "direct" => Some(Access::Direct),
            _ => None,
        }
    }
}

/// The bytes [`Source::read_span`] gives: read into the caller's scratch
/// buffer, or lent by a source that holds them in memory already (a remote
/// object's fetched bytes), without a copy.
pub enum Span<'a> {
    /// Read into the caller's scratch buffer.
    Read(&'a [u8]),
    /// The source's own bytes, kept alive while the span is.
    Held(Box<dyn AsRef<[u8]> + Send + Sync>),
}

impl std::fmt::Debug for Span<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = match self {
            Span::Read(_) => "read",
            Span::Held(_) => "held",
        };
        write!(f, "Span({how}, {} bytes)", self.len())
    }
}

impl Deref for Span<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Span::Read(b) => b,
            Span::Held(b) => (**b).as_ref(),
        }
    }
}

/// A source of bytes read by position: a local file, a chunk file of a
/// sparse frame, memory. Containers read only through it.
pub trait Source: Send + Sync {
    /// Length in bytes as known when the source was opened.
    fn len(&self) -> u64;
    /// Is it empty?
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` from `offset`, or fail (a short source is `Truncated`).
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Path for messages, if this source is a file.
    fn path(&self) -> Option<&Path> {
        None
    }
    /// `len` bytes at `offset`, read into `scratch` (grown as needed; its
    /// old contents are overwritten) or lent by a source that holds them
    /// ([`Span`]), with whether the page cache was bypassed. The range is
    /// checked against the source's length before `scratch` grows.
    fn read_span<'a>(
        &self,
        offset: u64,
        len: usize,
        access: Access,
        scratch: &'a mut Vec<u8>,
    ) -> Result<(Span<'a>, bool)> {
        let _ = access;
        buffered_span(self, offset, len, scratch)
    }
    /// Has the file this source reads been deleted (no name left)? Its
    /// disk space is freed once its descriptors close.
    fn gone(&self) -> bool {
        false
    }
    /// A hint that `len` bytes at `offset` will be read soon: a file source
    /// asks the kernel to start reading them into the page cache
    /// (`POSIX_FADV_WILLNEED`) and returns at once. Others ignore it.
    fn will_need(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
    /// `len` bytes at `offset` are about to be read, in several reads (the
    /// stored blocks one request touches): a source whose every read costs
    /// a round trip starts fetching them together and returns at once, so
    /// those reads wait for one fetch. Others ignore it: a local file's
    /// reads follow at once, through the kernel's read-ahead or bypassing
    /// the page cache for a cold range (a `POSIX_FADV_WILLNEED` here would
    /// have them wait for that read instead, and cost a sequential reader
    /// the kernel's read-ahead).
    fn will_read(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
    /// Does [`Source::will_read`] do anything here? Its callers skip
    /// working out what to say when it does not.
    fn joins_reads(&self) -> bool {
        false
    }
}

/// `read_span` through the page cache.
pub(super) fn buffered_span<'a, S: Source + ?Sized>(
    src: &S,
    offset: u64,
    len: usize,
    scratch: &'a mut Vec<u8>,
) -> Result<(Span<'a>, bool)> {
    check_range(src.len(), offset, len as u64)?;
    if scratch.len() < len {
        scratch.resize(len, 0);
    }
    src.read_exact_at(offset, &mut scratch[..len])?;
    Ok((Span::Read(&scratch[..len]), false))
}

/// Is `offset..offset + len` inside a source of `size` bytes?
pub(super) fn check_range(size: u64, offset: u64, len: u64) -> Result<()> {
    let end = offset
        .checked_add(len)
        .ok_or_else(|| Error::corrupt("offset overflow"))?;
    if end > size {
        return Err(Error::truncated(format!(
            "needs bytes {offset}..{end} but the source has {size}"
        )));
    }
    Ok(())
}

/// Read `len` bytes at `offset` into a fresh vector, after checking the range
/// lies inside the source (so a lying size never drives a huge allocation).
pub fn read_vec(src: &dyn Source, offset: u64, len: u64) -> Result<Vec<u8>> {
    check_range(src.len(), offset, len)?;
    let mut v = vec![0u8; len as usize];
    src.read_exact_at(offset, &mut v)?;
    Ok(v)
}

/// An in-memory source (tests, fuzzing, and small decoded structures).
pub struct MemSource(pub Arc<[u8]>);

impl MemSource {
    /// A source of the bytes `data`.
    pub fn new(data: impl Into<Arc<[u8]>>) -> Self {
        MemSource(data.into())
    }
}

impl Source for MemSource {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let start = usize::try_from(offset).map_err(|_| Error::truncated("offset too large"))?;
        let end = start
            .checked_add(buf.len())
            .filter(|&e| e <= self.0.len())
            .ok_or_else(|| {
                Error::truncated(format!(
                    "needs {} bytes at {offset} but the source has {}",
                    buf.len(),
                    self.0.len()
                ))
            })?;
        buf.copy_from_slice(&self.0[start..end]);
        Ok(())
    }
}
