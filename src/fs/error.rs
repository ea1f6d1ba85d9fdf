//! The presented tree's one error type, and the one place where errors
//! become errno.
//!
//! Every fallible operation of [`Fs`](super::Fs) returns an [`Error`]: the
//! errno the kernel is answered with and, where a lower layer failed, that
//! layer's error (its text says what failed). The lower layers' errors get
//! their errno through [`ToErrno`], implemented here for each: the
//! decoder's `blosc_decode::Error` (`EIO` for damaged or unsupported
//! content; an I/O failure's own errno), and `std::io::Error`, which is
//! also how the local tree and the remote stores fail (through
//! `blosc_decode::error::errno_of`, the workspace's one mapping of I/O
//! errors). `crate::fuse` alone answers the kernel with
//! [`Error::errno`]. The errno values the tree and its local sources
//! (`src/local/`) choose themselves are named by the constructors below.
//!
//! An error is logged where it is decided (once: repeated failures of one
//! file through `Fs::warn_once`), not where it is answered.

use std::fmt;

/// A failure of the presented tree: the errno it is answered with, and the
/// lower layer's error behind it, if any.
#[derive(Debug)]
pub struct Error {
    errno: i32,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// What a lower layer's error is answered with.
pub trait ToErrno {
    /// The errno a file system answers this error with.
    fn to_errno(&self) -> i32;
}

impl ToErrno for std::io::Error {
    fn to_errno(&self) -> i32 {
        blosc_decode::error::errno_of(self)
    }
}

impl ToErrno for blosc_decode::Error {
    fn to_errno(&self) -> i32 {
        self.errno()
    }
}

impl ToErrno for Error {
    fn to_errno(&self) -> i32 {
        self.errno
    }
}

impl Error {
    fn of(errno: i32) -> Error {
        Error {
            errno,
            source: None,
        }
    }
    /// The errno the kernel is answered with.
    pub fn errno(&self) -> i32 {
        self.errno
    }
    /// No such entry: `ENOENT`.
    pub fn not_found() -> Error {
        Error::of(libc::ENOENT)
    }
    /// The inode's source is gone or is another file now: `ESTALE` (the
    /// kernel looks the name up again).
    pub fn stale() -> Error {
        Error::of(libc::ESTALE)
    }
    /// No open handle by that number: `EBADF`.
    pub fn bad_handle() -> Error {
        Error::of(libc::EBADF)
    }
    /// No extended attribute by that name: `ENODATA`.
    pub fn no_attribute() -> Error {
        Error::of(libc::ENODATA)
    }
    /// An argument out of range (an `lseek`'s whence or offset): `EINVAL`.
    pub fn invalid() -> Error {
        Error::of(libc::EINVAL)
    }
    /// No data or hole at or past this offset (`SEEK_DATA`, `SEEK_HOLE`):
    /// `ENXIO`.
    pub fn past_end() -> Error {
        Error::of(libc::ENXIO)
    }
    /// A file listed as a directory: `ENOTDIR`.
    pub fn not_dir() -> Error {
        Error::of(libc::ENOTDIR)
    }
    /// A directory opened as a file: `EISDIR`.
    pub fn is_dir() -> Error {
        Error::of(libc::EISDIR)
    }
    /// A symbolic link opened as a file: `ELOOP`.
    pub fn symlink() -> Error {
        Error::of(libc::ELOOP)
    }
    /// A path with a name too long to look up (past `NAME_MAX`):
    /// `ENAMETOOLONG`.
    pub fn name_too_long() -> Error {
        Error::of(libc::ENAMETOOLONG)
    }
    /// Opened for writing: `EROFS`.
    pub fn read_only() -> Error {
        Error::of(libc::EROFS)
    }
    /// The caller may not read it: `EACCES`.
    pub fn denied() -> Error {
        Error::of(libc::EACCES)
    }
    /// Damaged, unreadable or changed content (logged where it was
    /// found): `EIO`.
    pub fn io() -> Error {
        Error::of(libc::EIO)
    }
    /// The decoder's error for a source of the tree failing with this
    /// errno because `reason`.
    pub fn in_source(&self, reason: impl Into<String>) -> blosc_decode::Error {
        blosc_decode::Error::io(self.errno, reason)
    }
    /// Is it `ENOENT`?
    pub fn is_not_found(&self) -> bool {
        self.errno == libc::ENOENT
    }
    /// Is it `ESTALE`?
    pub fn is_stale(&self) -> bool {
        self.errno == libc::ESTALE
    }
    /// Did the operation fail for want of file descriptors (`EMFILE`,
    /// `ENFILE`)?
    pub fn out_of_fds(&self) -> bool {
        out_of_fds(self.errno)
    }
    /// Did the source fail to answer (a failing disk, a remote store down
    /// or too slow: `EIO`, `ETIMEDOUT`), rather than say "not there"?
    pub fn unanswered(&self) -> bool {
        matches!(self.errno, libc::EIO | libc::ETIMEDOUT)
    }
    /// The errno of a lower layer's error, which it keeps as its source.
    fn from_lower<E>(e: E) -> Error
    where
        E: ToErrno + std::error::Error + Send + Sync + 'static,
    {
        Error {
            errno: e.to_errno(),
            source: Some(Box::new(e)),
        }
    }
}

/// Does the decoder's error name `EIO` itself (a failing disk, a file the
/// rules for links refuse), rather than fall back to it (damaged content,
/// an I/O error that names no errno)?
pub fn names_eio(e: &blosc_decode::Error) -> bool {
    e.kind == blosc_decode::ErrorKind::Io && e.errno == Some(libc::EIO)
}

/// Is `errno` a shortage of file descriptors (`EMFILE`, `ENFILE`)?
pub fn out_of_fds(errno: i32) -> bool {
    errno == libc::EMFILE || errno == libc::ENFILE
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::from_lower(e)
    }
}

impl From<blosc_decode::Error> for Error {
    fn from(e: blosc_decode::Error) -> Error {
        Error::from_lower(e)
    }
}

/// The error as an `std::io::Error` standing for its errno (what a source
/// tree fails with), its text kept.
impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        match e.source {
            None => std::io::Error::from_raw_os_error(e.errno),
            Some(s) => blosc_decode::error::io_err(e.errno, s.to_string()),
        }
    }
}

/// Two errors are alike when the kernel gets the same errno for them.
impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        self.errno == other.errno
    }
}

/// An error is its errno to a caller comparing the two (tests).
impl PartialEq<i32> for Error {
    fn eq(&self, errno: &i32) -> bool {
        self.errno == *errno
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(e) => write!(f, "{e}"),
            None => write!(f, "{}", std::io::Error::from_raw_os_error(self.errno)),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blosc_decode::error::io_err;
    use blosc_decode::ErrorKind;

    /// Every lower error, and every errno the tree chooses, with the errno
    /// the kernel gets for it.
    #[test]
    fn each_error_is_answered_with_its_errno() {
        let io = std::io::Error::from_raw_os_error;
        let decode = blosc_decode::Error::new;
        let table: Vec<(Error, i32)> = vec![
            (io(libc::EACCES).into(), libc::EACCES),
            (io(libc::ENOENT).into(), libc::ENOENT),
            (io(libc::ENAMETOOLONG).into(), libc::ENAMETOOLONG),
            (io(libc::EMFILE).into(), libc::EMFILE),
            (
                io_err(libc::ETIMEDOUT, "GET: timed out").into(),
                libc::ETIMEDOUT,
            ),
            (io_err(libc::ENOTDIR, "an object").into(), libc::ENOTDIR),
            (std::io::Error::other("no errno").into(), libc::EIO),
            (
                std::io::Error::new(std::io::ErrorKind::NotFound, "gone").into(),
                libc::ENOENT,
            ),
            (decode(ErrorKind::Truncated, "t").into(), libc::EIO),
            (decode(ErrorKind::Corrupt, "c").into(), libc::EIO),
            (decode(ErrorKind::Unsupported, "u").into(), libc::EIO),
            (decode(ErrorKind::Checksum, "s").into(), libc::EIO),
            (decode(ErrorKind::Changed, "g").into(), libc::EIO),
            (decode(ErrorKind::Missing, "m").into(), libc::EIO),
            (decode(ErrorKind::Io, "no errno").into(), libc::EIO),
            (
                blosc_decode::Error::io(libc::ESTALE, "r").into(),
                libc::ESTALE,
            ),
            (
                blosc_decode::Error::from(io(libc::EPERM)).into(),
                libc::EPERM,
            ),
            (Error::not_found(), libc::ENOENT),
            (Error::stale(), libc::ESTALE),
            (Error::bad_handle(), libc::EBADF),
            (Error::no_attribute(), libc::ENODATA),
            (Error::invalid(), libc::EINVAL),
            (Error::past_end(), libc::ENXIO),
            (Error::not_dir(), libc::ENOTDIR),
            (Error::is_dir(), libc::EISDIR),
            (Error::symlink(), libc::ELOOP),
            (Error::name_too_long(), libc::ENAMETOOLONG),
            (Error::read_only(), libc::EROFS),
            (Error::denied(), libc::EACCES),
            (Error::io(), libc::EIO),
        ];
        for (e, want) in table {
            assert_eq!((e.errno(), e.to_errno()), (want, want), "{e}");
            assert_eq!(e, want);
        }
    }

    #[test]
    fn the_predicates_name_their_errno() {
        let io = |n| Error::from(std::io::Error::from_raw_os_error(n));
        assert!(Error::not_found().is_not_found() && !Error::stale().is_not_found());
        assert!(Error::stale().is_stale() && !Error::io().is_stale());
        assert!(io(libc::EMFILE).out_of_fds() && io(libc::ENFILE).out_of_fds());
        assert!(!io(libc::ENOMEM).out_of_fds());
        assert!(Error::io().unanswered() && io(libc::ETIMEDOUT).unanswered());
        assert!(!Error::not_found().unanswered() && !io(libc::EACCES).unanswered());
        assert!(names_eio(&blosc_decode::Error::io(libc::EIO, "disk")));
        assert!(names_eio(&Error::io().in_source("refused")));
        assert!(!names_eio(&blosc_decode::Error::corrupt("bad")));
        assert!(!names_eio(&std::io::Error::other("odd").into()));
        assert!(!names_eio(&Error::stale().in_source("replaced")));
        assert_eq!(Error::stale().in_source("replaced").errno(), libc::ESTALE);
    }

    #[test]
    fn an_error_says_what_failed() {
        let e = Error::from(io_err(libc::ETIMEDOUT, "GET /a: timed out"));
        assert_eq!(e.to_string(), "GET /a: timed out");
        assert!(std::error::Error::source(&e).is_some());
        let e = Error::not_found();
        assert_eq!(
            e.to_string(),
            std::io::Error::from_raw_os_error(libc::ENOENT).to_string()
        );
        assert!(std::error::Error::source(&e).is_none());
    }
}
