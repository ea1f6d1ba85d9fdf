//! The `O_DIRECT` side of [`FileSource`]: a cold random block read may
//! bypass the page cache, when the kernel says the range is mostly not in it.

use super::file::FileSource;
use super::Access;
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// Alignment of `O_DIRECT` offsets, lengths and buffers (the largest
/// logical block size in common use; smaller ones divide it).
const DIO_ALIGN: u64 = 4096;

impl FileSource {
    /// Read `len` bytes at `offset` bypassing the page cache into an aligned
    /// part of `scratch`, if `access` and the file system allow: where they
    /// landed. `None`: read them buffered.
    pub(super) fn try_direct(
        &self,
        offset: u64,
        len: usize,
        access: Access,
        scratch: &mut Vec<u8>,
    ) -> Option<std::ops::Range<usize>> {
        let direct = self.direct_ok.load(Ordering::Relaxed)
            && match access {
                Access::Buffered => false,
                Access::Auto => mostly_uncached(&self.file, offset, len as u64) == Some(true),
                Access::Direct => true,
            };
        direct.then(|| self.read_direct(offset, len, scratch))?
    }

    /// The file again, with `O_DIRECT`: reopened through `/proc/self/fd`,
    /// so it is the same inode even if the path was renamed over since.
    fn direct_file(&self) -> Option<&File> {
        self.direct
            .get_or_init(|| {
                let proc = format!("/proc/self/fd/{}", self.file.as_raw_fd());
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_DIRECT)
                    .open(proc)
                    .ok()?;
                use std::os::unix::fs::MetadataExt;
                let (a, b) = (f.metadata().ok()?, self.file.metadata().ok()?);
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
                            self.path.display()
                        );
                    }
                    return None;
                }
            }
        }
        Some(pad + head..pad + want)
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
        if super::last_errno() == libc::ENOSYS {
            NO_CACHESTAT.store(true, Ordering::Relaxed);
        }
        return None;
    }
    let page = super::page_size();
    let pages = (offset + len).div_ceil(page) - offset / page;
    Some(st.nr_cache * 2 < pages)
}
