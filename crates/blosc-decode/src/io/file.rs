//! [`FileSource`]: a local file, read positionally, every read checked to
//! come from the version of the file that was opened.

use super::Source;
use crate::error::{Error, Result};
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// Open `path` for reading only if it is a regular file (following
/// symlinks). A fifo, socket or device is refused instead of opened for
/// good: opening a fifo blocks until a writer comes (a daemon thread hung),
/// and a device would be read as data. Checked on the opened descriptor, so
/// a file replaced by a fifo after it was looked up is refused too. Returns
/// the descriptor's metadata with it.
pub fn open_regular(path: &Path) -> std::io::Result<(File, std::fs::Metadata)> {
    checked_regular(regular_options().open(path)?)
}

/// How [`open_regular`] opens a file: read only, non-blocking (a fifo does
/// not wait for a writer), never as a controlling terminal.
pub fn regular_options() -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    o
}

/// A file opened with [`regular_options`], kept only if it is a regular
/// file (then back to blocking reads), with its metadata.
pub fn checked_regular(file: File) -> std::io::Result<(File, std::fs::Metadata)> {
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
pub fn set_blocking(file: &File) {
    // SAFETY: fcntl on an open descriptor; no memory involved.
    unsafe {
        let fl = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(file.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
}

/// A local file read with positional reads, each checked to come from the
/// version of the file that was opened ([`Stamp`]).
pub struct FileSource {
    file: File,
    path: PathBuf,
    /// The file's stamp when opened (its length among it): checked after
    /// every read, so bytes read while the file was rewritten in place are
    /// never used (a container's offsets over another version's bytes).
    version: Stamp,
}

/// Identity of one version of a file's content: a change of any of these
/// means other bytes (the file system keeps them for every file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// Length in bytes.
    pub size: u64,
    /// Modification time, in nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Status change time, in nanoseconds since the epoch.
    pub ctime_ns: i128,
    /// Inode number.
    pub ino: u64,
    /// Device number.
    pub dev: u64,
}

impl Stamp {
    /// The stamp of the file `md` describes.
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
    pub fn check(&self, now: Stamp, path: &Path) -> Result<()> {
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
    /// Open the regular file at `path` (a fifo, socket or device is refused).
    pub fn open(path: &Path) -> Result<Self> {
        let (file, md) = open_regular(path).map_err(|e| Error::from(e).in_file(path))?;
        Ok(FileSource::opened(file, &md, path))
    }

    /// A regular file already opened (`md`: its metadata then), named `path`.
    pub fn opened(file: File, md: &std::fs::Metadata, path: &Path) -> Self {
        FileSource {
            file,
            version: Stamp::of(md),
            path: path.to_path_buf(),
        }
    }

    /// The version of the file that was opened.
    pub fn stamp(&self) -> Stamp {
        self.version
    }

    /// The open file (for reads of a caller's own, such as the bloscfs
    /// daemon's `O_DIRECT` ones; check [`FileSource::check_unchanged`]
    /// after them).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Fails if the file is no longer the version it was when opened (its
    /// size or times changed): called after each read, so what was read
    /// is known to be that version's bytes.
    pub fn check_unchanged(&self) -> Result<()> {
        let md = self
            .file
            .metadata()
            .map_err(|e| Error::from(e).in_file(&self.path))?;
        self.version.check(Stamp::of(&md), &self.path)
    }
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
        self.check_unchanged()?;
        r
    }
    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }
}

impl AsRef<FileSource> for FileSource {
    fn as_ref(&self) -> &FileSource {
        self
    }
}
