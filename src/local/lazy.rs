//! [`LazyFileSource`]: a chunk file opened on first use (the library's
//! `LazyFile`), kept open while few enough are, process-wide.

use super::srcdir::SourceDir;
use super::DirectFile;
use blosc_decode::io::{LazyFile, Opener};
use blosc_decode::Result;
use std::path::Path;
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

/// How many lazily opened files are kept open now (all sources).
pub fn kept_open() -> usize {
    KEPT_OPEN.load(Ordering::Relaxed)
}

/// How the daemon opens a chunk file on its first read: by its path (of
/// any length) or by name in its directory ([`SourceDir::open_file`]'s
/// rules, never by a path looked up again); kept open while fewer than
/// [`max_kept_open`] such files are, process-wide.
pub enum Budgeted {
    /// Opened by its path.
    Path,
    /// Opened by name in this directory.
    InDir(Arc<SourceDir>),
}

impl Opener for Budgeted {
    type File = DirectFile;
    fn open(&self, path: &Path) -> Result<DirectFile> {
        match self {
            Budgeted::Path => super::open_file(path),
            Budgeted::InDir(d) => {
                let name = path.file_name().unwrap_or_default();
                super::open_in(d, &name.to_string_lossy())
            }
        }
    }
    fn keep(&self) -> bool {
        if KEPT_OPEN.fetch_add(1, Ordering::Relaxed) < max_kept_open() {
            return true;
        }
        KEPT_OPEN.fetch_sub(1, Ordering::Relaxed);
        false
    }
    fn release(&self) {
        KEPT_OPEN.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A chunk file opened on first use within the descriptor budget (see
/// [`Budgeted`]).
pub type LazyFileSource = LazyFile<Budgeted>;

/// The file `name` in `dir`, opened there on its first read.
pub fn lazy_in_dir(dir: Arc<SourceDir>, name: &str) -> LazyFileSource {
    LazyFile::new(dir.path().join(name), Budgeted::InDir(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use blosc_decode::io::{Access, Source};

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
                (LazyFile::new(p, Budgeted::Path), data)
            })
            .collect();
        let mut scratch = Vec::new();
        for _ in 0..2 {
            for (s, data) in &srcs {
                assert_eq!(s.len(), data.len() as u64);
                let (got, _) = s
                    .read_span(100, 4000, Access::Buffered, &mut scratch)
                    .unwrap();
                assert_eq!(&got[..], &data[100..4100]);
            }
        }
        assert!(kept_open() <= max_kept_open());
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
