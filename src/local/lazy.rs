//! [`LazyFileSource`]: a file opened on first use, and kept open while few
//! enough are.

use super::srcdir::SourceDir;
use super::DirectFile;
use blosc_decode::io::{Access, Source, Stamp};
use blosc_decode::Result;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

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

/// The soft limit on open file descriptors (`RLIMIT_NOFILE`; 1024 if
/// unknown).
pub fn fd_limit() -> usize {
    fd_limits().map_or(1024, |r| usize::try_from(r.rlim_cur).unwrap_or(usize::MAX))
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
    kept: OnceLock<DirectFile>,
    /// The file's stamp at the first open (its length among it).
    first: OnceLock<Stamp>,
}

impl LazyFileSource {
    /// The file at `path`, opened on its first read.
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
    fn with<R>(&self, f: impl FnOnce(&DirectFile) -> Result<R>) -> Result<R> {
        if let Some(k) = self.kept.get() {
            return f(k);
        }
        let file = match &self.dir {
            Some(d) => {
                let name = self.path.file_name().unwrap_or_default();
                super::open_in(d, &name.to_string_lossy())?
            }
            None => super::open_file(&self.path)?,
        };
        let first = *self.first.get_or_init(|| file.stamp());
        first.check(file.stamp(), &self.path)?;
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
        assert_eq!(e.kind, blosc_decode::ErrorKind::Changed, "{e}");
    }
}
