//! [`DirectFile`]: a local file whose cold random block reads bypass the
//! page cache (`O_DIRECT`), when the container's [`Access`] allows it
//! (`-o source_io=`) and, for `auto`, when the kernel says the range is
//! mostly not in the page cache. The kernel then neither fills page-cache
//! pages nor copies out of them, and the read costs about the disk's time
//! alone. Everything else reads through the decoder's [`FileSource`].

use blosc_decode::io::{page_size, Access, FileSource, Source, Span, Stamp};
use blosc_decode::Result;
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// Alignment of `O_DIRECT` offsets, lengths and buffers (the largest
/// logical block size in common use; smaller ones divide it).
const DIO_ALIGN: u64 = 4096;

/// A local file read as [`FileSource`] reads it, except for block reads
/// that may bypass the page cache.
pub struct DirectFile {
    file: FileSource,
    /// The same file opened with `O_DIRECT`, on first need (`None`: the
    /// file system refuses it).
    direct: OnceLock<Option<File>>,
    /// Cleared when a direct read is refused (`EINVAL`): buffered from then on.
    direct_ok: AtomicBool,
}

impl AsRef<FileSource> for DirectFile {
    fn as_ref(&self) -> &FileSource {
        &self.file
    }
}

impl DirectFile {
    /// `file`, with block reads that may bypass the page cache.
    pub fn new(file: FileSource) -> Self {
        DirectFile {
            file,
            direct: OnceLock::new(),
            direct_ok: AtomicBool::new(true),
        }
    }

    /// The version of the file that was opened.
    pub fn stamp(&self) -> Stamp {
        self.file.stamp()
    }

    /// Read `len` bytes at `offset` bypassing the page cache into an aligned
    /// part of `scratch`, if `access` and the file system allow: where they
    /// landed. `None`: read them buffered.
    fn try_direct(
        &self,
        offset: u64,
        len: usize,
        access: Access,
        scratch: &mut Vec<u8>,
    ) -> Option<std::ops::Range<usize>> {
        let direct = self.direct_ok.load(Ordering::Relaxed)
            && match access {
                Access::Buffered => false,
                Access::Auto => mostly_uncached(self.file.file(), offset, len as u64) == Some(true),
                Access::Direct => true,
            };
        direct.then(|| self.read_direct(offset, len, scratch))?
    }

    /// The file again, with `O_DIRECT`: reopened through `/proc/self/fd`,
    /// so it is the same inode even if the path was renamed over since.
    fn direct_file(&self) -> Option<&File> {
        self.direct
            .get_or_init(|| {
                let file = self.file.file();
                let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_DIRECT)
                    .open(proc)
                    .ok()?;
                use std::os::unix::fs::MetadataExt;
                let (a, b) = (f.metadata().ok()?, file.metadata().ok()?);
                (a.dev() == b.dev() && a.ino() == b.ino()).then_some(f)
            })
            .as_ref()
    }

    /// Read `len` bytes at `offset` with `O_DIRECT` into an aligned part of
    /// `scratch`; where they landed. `None` when the file system refuses
    /// (then read buffered; that read also reports a file shorter than
    /// expected).
    fn read_direct(
        &self,
        offset: u64,
        len: usize,
        scratch: &mut Vec<u8>,
    ) -> Option<std::ops::Range<usize>> {
        let f = self.direct_file()?;
        let a0 = offset / DIO_ALIGN * DIO_ALIGN;
        let a1 = (offset + len as u64).div_ceil(DIO_ALIGN) * DIO_ALIGN;
        let span = (a1 - a0) as usize;
        let need = span + DIO_ALIGN as usize;
        if scratch.len() < need {
            scratch.resize(need, 0);
        }
        let pad = scratch.as_ptr().align_offset(DIO_ALIGN as usize);
        let head = (offset - a0) as usize;
        let want = head + len;
        let dst = &mut scratch[pad..pad + span];
        let mut got = 0;
        while got < want {
            match f.read_at(&mut dst[got..], a0 + got as u64) {
                // Past the end, or an unaligned retry after a short read.
                Ok(0) => return None,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if e.raw_os_error() == Some(libc::EINVAL) && got == 0 {
                        self.direct_ok.store(false, Ordering::Relaxed);
                        log::debug!(
                            "{}: O_DIRECT refused, reading through the page cache",
                            self.path().unwrap_or(Path::new("")).display()
                        );
                    }
                    return None;
                }
            }
        }
        Some(pad + head..pad + want)
    }
}

impl Source for DirectFile {
    fn len(&self) -> u64 {
        self.file.len()
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file.read_exact_at(offset, buf)
    }
    fn path(&self) -> Option<&Path> {
        self.file.path()
    }
    fn gone(&self) -> bool {
        self.file.gone()
    }
    fn will_need(&self, offset: u64, len: u64) {
        self.file.will_need(offset, len)
    }
    fn read_span<'a>(
        &self,
        offset: u64,
        len: usize,
        access: Access,
        scratch: &'a mut Vec<u8>,
    ) -> Result<(Span<'a>, bool)> {
        // A range past the end is refused by the buffered read, before
        // `scratch` grows.
        let inside = offset
            .checked_add(len as u64)
            .is_some_and(|end| end <= self.len());
        if inside {
            if let Some(r) = self.try_direct(offset, len, access, scratch) {
                self.file.check_unchanged()?;
                return Ok((Span::Read(&scratch[r]), true));
            }
        }
        self.file.read_span(offset, len, Access::Buffered, scratch)
    }
}

/// Is less than half of `offset..offset + len` of `file` in the page cache?
/// `None` when the kernel cannot tell (`cachestat(2)` is Linux 6.5+).
fn mostly_uncached(file: &File, offset: u64, len: u64) -> Option<bool> {
    static NO_CACHESTAT: AtomicBool = AtomicBool::new(false);
    if NO_CACHESTAT.load(Ordering::Relaxed) || len == 0 {
        return None;
    }
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    const SYS_CACHESTAT: libc::c_long = 451; // the same on every architecture
    let range = Range { off: offset, len };
    let mut st = Stat::default();
    // SAFETY: valid pointers to a range and a result struct of the kernel's layout.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const Range,
            &mut st as *mut Stat,
            0u32,
        )
    };
    if r != 0 {
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            NO_CACHESTAT.store(true, Ordering::Relaxed);
        }
        return None;
    }
    let page = page_size();
    let pages = (offset + len).div_ceil(page) - offset / page;
    Some(st.nr_cache * 2 < pages)
}

#[cfg(test)]
#[path = "direct_tests.rs"]
mod tests;
