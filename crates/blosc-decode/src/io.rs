//! The one I/O trait: positional reads from a source of bytes.
//!
//! Parsing code never touches files; containers hold `Arc<dyn Source>` and ask
//! for exactly the byte ranges they need. Positional reads (not mmap) mean a
//! source truncated underneath us gives an error, never `SIGBUS`.
//!
//! Block reads go through [`Source::read_span`], which may bypass the page
//! cache for a cold random read (`O_DIRECT`): the kernel then neither fills
//! page-cache pages nor copies out of them, and the read costs about the
//! disk's time alone.

use crate::error::{Error, Result};
use crate::srcdir::SourceDir;
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// How a read may use the kernel's page cache (`-o source_io=`; a container
/// turns `Auto` into `Buffered` for reads that continue a sequential scan).
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

pub trait Source: Send + Sync {
    /// Length in bytes as known when the source was opened.
    fn len(&self) -> u64;
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
    /// old contents are overwritten) and returned as a slice of it, with
    /// whether the page cache was bypassed. The range is checked against
    /// the source's length before `scratch` grows.
    fn read_span<'a>(
        &self,
        offset: u64,
        len: usize,
        access: Access,
        scratch: &'a mut Vec<u8>,
    ) -> Result<(&'a [u8], bool)> {
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
}

/// `read_span` through the page cache.
fn buffered_span<'a, S: Source + ?Sized>(
    src: &S,
    offset: u64,
    len: usize,
    scratch: &'a mut Vec<u8>,
) -> Result<(&'a [u8], bool)> {
    check_range(src.len(), offset, len as u64)?;
    if scratch.len() < len {
        scratch.resize(len, 0);
    }
    src.read_exact_at(offset, &mut scratch[..len])?;
    Ok((&scratch[..len], false))
}

/// Is `offset..offset + len` inside a source of `size` bytes?
fn check_range(size: u64, offset: u64, len: u64) -> Result<()> {
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

/// Open `path` for reading only if it is a regular file (following
/// symlinks). A fifo, socket or device is refused instead of opened for
/// good: opening a fifo blocks until a writer comes (a daemon thread hung),
/// and a device would be read as data. Checked on the opened descriptor, so
/// a file replaced by a fifo after it was looked up is refused too. Returns
/// the descriptor's metadata with it.
pub fn open_regular(path: &Path) -> std::io::Result<(File, std::fs::Metadata)> {
    let file = crate::longpath::open(
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY),
        path,
    )?;
    let md = file.metadata()?;
    if !md.is_file() {
        return Err(std::io::Error::other(
            "not a regular file (a fifo, socket or device)",
        ));
    }
    set_blocking(&file);
    Ok((file, md))
}

/// Back to blocking reads on a file opened non-blocking (for a regular file
/// the flag changes nothing, but a descriptor should say what it is).
pub(crate) fn set_blocking(file: &File) {
    // SAFETY: fcntl on an open descriptor; no memory involved.
    unsafe {
        let fl = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(file.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
}

pub struct FileSource {
    file: File,
    path: PathBuf,
    /// The file's stamp when opened (its length among it): checked after
    /// every read, so bytes read while the file was rewritten in place are
    /// never used (a container's offsets over another version's bytes).
    version: Stamp,
    /// The same file opened with `O_DIRECT`, on first need (`None`: the
    /// file system refuses it).
    direct: OnceLock<Option<File>>,
    /// Cleared when a direct read is refused (`EINVAL`): buffered from then on.
    direct_ok: AtomicBool,
}

/// Alignment of `O_DIRECT` offsets, lengths and buffers (the largest
/// logical block size in common use; smaller ones divide it).
const DIO_ALIGN: u64 = 4096;

/// Identity of one version of a file's content: a change of any of these
/// means other bytes (the file system keeps them for every file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub ino: u64,
    pub dev: u64,
}

impl Stamp {
    pub fn of(md: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            size: md.len(),
            mtime_ns: md.mtime() as i128 * 1_000_000_000 + md.mtime_nsec() as i128,
            ctime_ns: md.ctime() as i128 * 1_000_000_000 + md.ctime_nsec() as i128,
            ino: md.ino(),
            dev: md.dev(),
        }
    }

    /// `Changed` unless `now` is this same version of the file at `path`.
    fn check(&self, now: Stamp, path: &Path) -> Result<()> {
        if now == *self {
            return Ok(());
        }
        Err(Error::changed(
            "changed since it was opened (rewritten, truncated or replaced): reopen it to read the new content",
        )
        .in_file(path))
    }
}

impl FileSource {
    pub fn open(path: &Path) -> Result<Self> {
        let (file, md) = open_regular(path).map_err(|e| Error::from(e).in_file(path))?;
        Ok(FileSource::opened(file, &md, path))
    }

    /// `name` in `dir`, opened by [`SourceDir::open_file`]'s rules.
    pub fn open_in(dir: &SourceDir, name: &str) -> Result<Self> {
        let (file, md) = dir.open_file(name)?;
        Ok(FileSource::opened(file, &md, &dir.path().join(name)))
    }

    /// A regular file already opened (`md`: its metadata then), named `path`.
    pub fn opened(file: File, md: &std::fs::Metadata, path: &Path) -> Self {
        FileSource {
            file,
            version: Stamp::of(md),
            path: path.to_path_buf(),
            direct: OnceLock::new(),
            direct_ok: AtomicBool::new(true),
        }
    }

    /// Fails if the file is no longer the version it was when opened (its
    /// size or times changed): called after each read, so what was read
    /// is known to be that version's bytes.
    fn still_the_same(&self) -> Result<()> {
        let md = self
            .file
            .metadata()
            .map_err(|e| Error::from(e).in_file(&self.path))?;
        self.version.check(Stamp::of(&md), &self.path)
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
        if last_errno() == libc::ENOSYS {
            NO_CACHESTAT.store(true, Ordering::Relaxed);
        }
        return None;
    }
    let page = page_size();
    let pages = (offset + len).div_ceil(page) - offset / page;
    Some(st.nr_cache * 2 < pages)
}

impl Source for FileSource {
    fn len(&self) -> u64 {
        self.version.size
    }
    fn gone(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.file.metadata().is_ok_and(|m| m.nlink() == 0)
    }
    fn will_need(&self, offset: u64, len: u64) {
        let (Ok(o), Ok(l)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        // SAFETY: a plain syscall on our own open fd; a failure only means
        // no hint was taken.
        unsafe { libc::posix_fadvise(self.file.as_raw_fd(), o, l, libc::POSIX_FADV_WILLNEED) };
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let r = self.file.read_exact_at(buf, offset).map_err(|e| {
            let mut err = Error::from(e);
            if err.kind == crate::error::ErrorKind::Truncated {
                err.reason = format!(
                    "source shorter than expected reading {} bytes at {offset}",
                    buf.len()
                );
            }
            err
        });
        // A short read is most likely the file cut since it was opened:
        // say so rather than "shorter than expected".
        self.still_the_same()?;
        r
    }
    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }
    fn read_span<'a>(
        &self,
        offset: u64,
        len: usize,
        access: Access,
        scratch: &'a mut Vec<u8>,
    ) -> Result<(&'a [u8], bool)> {
        check_range(self.version.size, offset, len as u64)?;
        let direct = self.direct_ok.load(Ordering::Relaxed)
            && match access {
                Access::Buffered => false,
                Access::Auto => mostly_uncached(&self.file, offset, len as u64) == Some(true),
                Access::Direct => true,
            };
        if direct {
            if let Some(r) = self.read_direct(offset, len, scratch) {
                self.still_the_same()?;
                return Ok((&scratch[r], true));
            }
        }
        buffered_span(self, offset, len, scratch)
    }
}

/// An in-memory source (tests, fuzzing, and small decoded structures).
pub struct MemSource(pub Arc<[u8]>);

impl MemSource {
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

/// The soft limit on open file descriptors (`RLIMIT_NOFILE`; 1024 if
/// unknown).
pub fn fd_limit() -> usize {
    fd_limits().map_or(1024, |r| usize::try_from(r.rlim_cur).unwrap_or(usize::MAX))
}

/// The soft and hard limits on open file descriptors (`RLIMIT_NOFILE`), if
/// the system says.
pub fn fd_limits() -> Option<libc::rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limits into `r`, a valid struct.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0).then_some(r)
}

/// The size of a memory page in bytes (4096 if the system does not say).
pub fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
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

/// The errno of an I/O error (`EIO` if it carries none), for a filesystem reply.
pub fn errno_of(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Most lazily opened files kept open at once, process-wide: 1024, and at
/// most a quarter of the file-descriptor limit. Past it a read opens its
/// file, reads and closes it again. A sparse frame may have tens of
/// thousands of chunk files; kept open, they ran the daemon out of file
/// descriptors ("Too many open files" for every read after).
pub fn max_kept_open() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| (fd_limit() / 4).clamp(16, 1024))
}

static KEPT_OPEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A file opened on first use (sparse frames may have thousands of chunk
/// files; most are never read), and kept open while fewer than
/// [`max_kept_open`] such files are. A file opened again must be the
/// version first opened (else the read fails as `Changed`).
pub struct LazyFileSource {
    path: PathBuf,
    /// The directory it is opened in by name (`SourceDir::open_file`'s
    /// rules), or none: opened by its path.
    dir: Option<Arc<SourceDir>>,
    kept: OnceLock<FileSource>,
    /// The file's stamp at the first open (its length among it).
    first: OnceLock<Stamp>,
}

impl LazyFileSource {
    pub fn new(path: PathBuf) -> Self {
        LazyFileSource {
            path,
            dir: None,
            kept: OnceLock::new(),
            first: OnceLock::new(),
        }
    }

    /// The file `name` in `dir`, opened there by [`SourceDir::open_file`]'s
    /// rules (never by a path looked up again).
    pub fn in_dir(dir: Arc<SourceDir>, name: &str) -> Self {
        LazyFileSource {
            path: dir.path().join(name),
            dir: Some(dir),
            kept: OnceLock::new(),
            first: OnceLock::new(),
        }
    }

    /// How many lazily opened files are kept open now (all sources).
    pub fn kept_open() -> usize {
        KEPT_OPEN.load(Ordering::Relaxed)
    }

    /// Run `f` on the file: the one kept open, or one opened for this call.
    fn with<R>(&self, f: impl FnOnce(&FileSource) -> Result<R>) -> Result<R> {
        if let Some(k) = self.kept.get() {
            return f(k);
        }
        let file = match &self.dir {
            Some(d) => {
                let name = self.path.file_name().unwrap_or_default();
                FileSource::open_in(d, &name.to_string_lossy())?
            }
            None => FileSource::open(&self.path)?,
        };
        let first = *self.first.get_or_init(|| file.version);
        first.check(file.version, &self.path)?;
        if KEPT_OPEN.fetch_add(1, Ordering::Relaxed) < max_kept_open() {
            match self.kept.set(file) {
                Ok(()) => return f(self.kept.get().expect("just set")),
                // Another thread kept its own: use that one.
                Err(ours) => {
                    KEPT_OPEN.fetch_sub(1, Ordering::Relaxed);
                    drop(ours);
                    return f(self.kept.get().expect("set by another thread"));
                }
            }
        }
        KEPT_OPEN.fetch_sub(1, Ordering::Relaxed);
        f(&file)
    }
}

impl Drop for LazyFileSource {
    fn drop(&mut self) {
        if self.kept.get().is_some() {
            KEPT_OPEN.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Source for LazyFileSource {
    /// The file's length; if it cannot be opened, `u64::MAX`, so that
    /// length checks pass and the read itself reports the open error (with
    /// the file's name) instead of a misleading "source has 0 bytes".
    fn len(&self) -> u64 {
        if let Some(first) = self.first.get() {
            return first.size;
        }
        self.with(|f| Ok(f.len())).unwrap_or(u64::MAX)
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.with(|f| f.read_exact_at(offset, buf))
    }
    fn gone(&self) -> bool {
        self.kept.get().is_some_and(|f| f.gone())
    }
    /// Forwarded while the file is kept open (a hint never opens a chunk
    /// file: a sparse frame's thousands of them would each hold a
    /// descriptor).
    fn will_need(&self, offset: u64, len: u64) {
        if let Some(f) = self.kept.get() {
            f.will_need(offset, len);
        }
    }
    fn read_span<'a>(
        &self,
        offset: u64,
        len: usize,
        access: Access,
        scratch: &'a mut Vec<u8>,
    ) -> Result<(&'a [u8], bool)> {
        self.with(|f| f.read_span(offset, len, access, scratch))
    }
    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file of `n` pseudo-random bytes in a new temporary directory (on a
    /// disk file system `O_DIRECT` works; tmpfs may refuse it, and then
    /// the reads fall back to the page cache).
    fn file(n: usize) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let data: Vec<u8> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        std::fs::File::create(&p).unwrap().write_all(&data).unwrap();
        (dir, p, data)
    }

    /// Every access mode returns the file's bytes, at aligned and unaligned
    /// offsets and lengths, up to and at the end of a file whose length is
    /// not a multiple of the alignment; the scratch buffer is reused.
    #[test]
    fn read_span_is_exact_in_every_mode() {
        let n = 3 * 65536 + 1234;
        let (_d, p, data) = file(n);
        let src = FileSource::open(&p).unwrap();
        let direct_possible = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&p)
            .is_ok();
        let mut scratch = Vec::new();
        let cases = [
            (0, 4096),
            (0, n),
            (1, 4095),
            (4095, 2),
            (4096, 65536),
            (12345, 100_000),
            (n as u64 - 1, 1),
            (n as u64 - 5000, 5000),
            (65536 * 3, 1234),
            (7, 0),
        ];
        for access in [Access::Buffered, Access::Auto, Access::Direct] {
            let mut bypassed = 0;
            for &(off, len) in &cases {
                let (got, direct) = src.read_span(off, len, access, &mut scratch).unwrap();
                assert_eq!(
                    got,
                    &data[off as usize..off as usize + len],
                    "{access:?} {off}+{len}"
                );
                bypassed += direct as usize;
            }
            match access {
                Access::Buffered => assert_eq!(bypassed, 0),
                Access::Direct if direct_possible => assert_eq!(bypassed, cases.len()),
                _ => {}
            }
        }
    }

    /// Ranges past the end are refused before anything is allocated, and a
    /// file truncated after opening gives an error in every mode.
    #[test]
    fn read_span_past_the_end_and_truncated_underneath() {
        let (_d, p, _) = file(100_000);
        let src = FileSource::open(&p).unwrap();
        let mut scratch = Vec::new();
        for access in [Access::Buffered, Access::Auto, Access::Direct] {
            let e = src
                .read_span(90_000, usize::MAX / 2, access, &mut scratch)
                .unwrap_err();
            assert_eq!(e.kind, crate::error::ErrorKind::Truncated);
            assert!(scratch.capacity() < 1 << 20);
        }
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(50_000)
            .unwrap();
        // Every read fails, also of the part the file still has.
        for (off, len) in [(40_000, 40_000), (0, 4096)] {
            for access in [Access::Buffered, Access::Auto, Access::Direct] {
                let e = src.read_span(off, len, access, &mut scratch).unwrap_err();
                assert!(
                    e.to_string().contains("changed since it was opened"),
                    "{access:?}: {e}"
                );
                assert_eq!(e.errno(), libc::EIO);
            }
        }
    }

    /// More lazily opened files than may be kept open: every one reads
    /// exactly, no more than the cap stay open, and one opened again for a
    /// read must still be the version first opened.
    #[test]
    fn lazy_files_past_the_cap_are_opened_per_read() {
        let d = tempfile::tempdir().unwrap();
        let n = max_kept_open() + 40;
        let srcs: Vec<(LazyFileSource, Vec<u8>)> = (0..n)
            .map(|i| {
                let p = d.path().join(format!("{i}"));
                let data: Vec<u8> = (0..5000u32).map(|k| (k * 7 + i as u32) as u8).collect();
                std::fs::write(&p, &data).unwrap();
                (LazyFileSource::new(p), data)
            })
            .collect();
        let mut scratch = Vec::new();
        for _ in 0..2 {
            for (s, data) in &srcs {
                assert_eq!(s.len(), data.len() as u64);
                let (got, _) = s
                    .read_span(100, 4000, Access::Buffered, &mut scratch)
                    .unwrap();
                assert_eq!(got, &data[100..4100]);
            }
        }
        assert!(LazyFileSource::kept_open() <= max_kept_open());
        // The last ones were not kept: opened again, they must not have changed.
        let (last, data) = srcs.last().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(
            last.path().unwrap(),
            data.iter().map(|b| !b).collect::<Vec<u8>>(),
        )
        .unwrap();
        let mut buf = vec![0u8; 16];
        let e = last.read_exact_at(0, &mut buf).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::Changed, "{e}");
    }

    /// A file rewritten in place with other bytes of the same size after it
    /// was opened: reads fail rather than return the new bytes to be
    /// decoded with the old version's offsets.
    #[test]
    fn a_file_rewritten_in_place_fails_every_read() {
        let (_d, p, data) = file(100_000);
        let src = FileSource::open(&p).unwrap();
        let mut buf = vec![0u8; 4096];
        src.read_exact_at(0, &mut buf).unwrap();
        assert_eq!(buf, data[..4096]);
        // Past the file system's timestamp granularity.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let other: Vec<u8> = data.iter().map(|b| b ^ 0x5a).collect();
        std::fs::write(&p, &other).unwrap();
        let e = src.read_exact_at(0, &mut buf).unwrap_err();
        assert!(e.to_string().contains("changed since it was opened"), "{e}");
        let mut scratch = Vec::new();
        for access in [Access::Buffered, Access::Auto, Access::Direct] {
            assert!(src.read_span(8192, 4096, access, &mut scratch).is_err());
        }
    }
}
