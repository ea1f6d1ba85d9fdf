//! One error type for the whole crate, carrying enough context to name the
//! file, chunk and block that failed and why.

use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong, coarsely: [`Error::errno`] is `EIO` for every kind
/// but `Io`, which keeps the errno of the failure it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input ends before a structure it declares.
    Truncated,
    /// A field holds a value that cannot be right (lying sizes, bad magic, ...).
    Corrupt,
    /// A valid file using something we do not implement (codec, filter, version).
    Unsupported,
    /// A stored checksum does not match.
    Checksum,
    /// An operating-system I/O error.
    Io,
    /// A source file changed (rewritten or cut in place) since it was
    /// opened: what was read of it may be another version's bytes.
    Changed,
    /// The container does not hold these bytes: a cache's chunk or block
    /// that was never fetched from its source.
    Missing,
}

#[derive(Debug, Clone)]
/// An error: what kind, why, and where (file, chunk, block).
pub struct Error {
    /// What went wrong, coarsely.
    pub kind: ErrorKind,
    /// Why, in words.
    pub reason: String,
    /// The file it happened in.
    pub path: Option<PathBuf>,
    /// The chunk, by the container's numbering.
    pub chunk: Option<u64>,
    /// The block within the chunk.
    pub block: Option<u64>,
    /// errno of the underlying I/O error, if any.
    pub errno: Option<i32>,
}

/// A result whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` for `reason`, located nowhere yet.
    pub fn new(kind: ErrorKind, reason: impl Into<String>) -> Self {
        Error {
            kind,
            reason: reason.into(),
            path: None,
            chunk: None,
            block: None,
            errno: None,
        }
    }
    /// The input ends before a structure it declares.
    pub fn truncated(reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::Truncated, reason)
    }
    /// A field holds a value that cannot be right.
    pub fn corrupt(reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::Corrupt, reason)
    }
    /// A valid file using something not implemented.
    pub fn unsupported(reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, reason)
    }
    /// A stored checksum does not match.
    pub fn checksum(reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::Checksum, reason)
    }
    /// The source changed since it was opened (see [`ErrorKind::Changed`]).
    pub fn changed(reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::Changed, reason)
    }
    /// An I/O error a filesystem reports as `errno`.
    pub fn io(errno: i32, reason: impl Into<String>) -> Self {
        Error {
            errno: Some(errno),
            ..Self::new(ErrorKind::Io, reason)
        }
    }
    /// Say what was being read when this went wrong: the reason becomes
    /// `what: reason` (outermost first, as the location is printed).
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.reason = format!("{what}: {}", self.reason);
        self
    }
    /// Attach a chunk number unless one is already set (innermost wins).
    pub fn in_chunk(mut self, chunk: u64) -> Self {
        self.chunk.get_or_insert(chunk);
        self
    }
    /// Attach a block number unless one is already set (innermost wins).
    pub fn in_block(mut self, block: u64) -> Self {
        self.block.get_or_insert(block);
        self
    }
    /// Attach a file unless one is already set (innermost wins).
    pub fn in_file(mut self, path: &Path) -> Self {
        if self.path.is_none() {
            self.path = Some(path.to_path_buf());
        }
        self
    }
    /// The errno a filesystem should report for this error.
    pub fn errno(&self) -> i32 {
        match self.kind {
            ErrorKind::Io => self.errno.unwrap_or(libc::EIO),
            _ => libc::EIO,
        }
    }
}

/// [`Error`]'s context helpers on results, for errors of any type that
/// converts into one (`std::io::Error` included): `read(..).in_file(path)?`
/// instead of `read(..).map_err(|e| Error::from(e).in_file(path))?`.
pub trait Context<T> {
    /// See [`Error::context`].
    fn context(self, what: impl fmt::Display) -> Result<T>;
    /// See [`Error::in_chunk`].
    fn in_chunk(self, chunk: u64) -> Result<T>;
    /// See [`Error::in_block`].
    fn in_block(self, block: u64) -> Result<T>;
    /// See [`Error::in_file`].
    fn in_file(self, path: &Path) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| e.into().context(what))
    }
    fn in_chunk(self, chunk: u64) -> Result<T> {
        self.map_err(|e| e.into().in_chunk(chunk))
    }
    fn in_block(self, block: u64) -> Result<T> {
        self.map_err(|e| e.into().in_block(block))
    }
    fn in_file(self, path: &Path) -> Result<T> {
        self.map_err(|e| e.into().in_file(path))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        let mut err = Error::new(ErrorKind::Io, e.to_string());
        err.errno = stated_errno(&e);
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            err.kind = ErrorKind::Truncated;
            err.reason = "unexpected end of file".into();
        }
        err
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.path {
            write!(f, "{}: ", p.display())?;
        }
        if let Some(c) = self.chunk {
            write!(f, "chunk {c}: ")?;
        }
        if let Some(b) = self.block {
            write!(f, "block {b}: ")?;
        }
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Error {}

/// An `std::io::Error` that stands for `errno`, with a message of its own
/// (a remote store's failure: no system call gave it an errno).
pub fn io_err(errno: i32, msg: impl Into<String>) -> std::io::Error {
    let kind = std::io::Error::from_raw_os_error(errno).kind();
    std::io::Error::new(kind, Errno(errno, msg.into()))
}

/// The payload of an [`io_err`]: a message that remembers its errno, so an
/// `std::io::Error` without `raw_os_error` still maps back to it.
#[derive(Debug)]
pub struct Errno(pub i32, pub String);

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.1)
    }
}

impl std::error::Error for Errno {}

/// The errno an `std::io::Error` stands for: the system call's own; else
/// the one an [`io_err`] was made with; else `ENOENT` for an error of kind
/// `NotFound` and `EIO` for any other. The one mapping of I/O errors to
/// errno, for every crate of the workspace.
pub fn errno_of(e: &std::io::Error) -> i32 {
    stated_errno(e).unwrap_or(libc::EIO)
}

/// [`errno_of`] but `None` where it would fall back to `EIO` (an error
/// that names no errno, as [`Error::errno`] keeps it).
fn stated_errno(e: &std::io::Error) -> Option<i32> {
    if let Some(n) = e.raw_os_error() {
        return Some(n);
    }
    match e.get_ref().and_then(|i| i.downcast_ref::<Errno>()) {
        Some(Errno(n, _)) => Some(*n),
        None if e.kind() == std::io::ErrorKind::NotFound => Some(libc::ENOENT),
        None => None,
    }
}

/// `ensure!(cond, kind_ctor, "fmt", args)`: return an error unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $ctor:ident, $($arg:tt)+) => {
        if !$cond {
            return Err($crate::error::Error::$ctor(format!($($arg)+)));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_helpers_keep_the_innermost_location_and_prefix_the_reason() {
        let r: Result<()> = Err(Error::corrupt("bad size").in_block(3));
        let e = r
            .context(format_args!("stream {}", 2))
            .in_block(9)
            .in_chunk(1)
            .in_file(Path::new("a.b2frame"))
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Corrupt);
        assert_eq!(
            e.to_string(),
            "a.b2frame: chunk 1: block 3: stream 2: bad size"
        );

        let io: std::result::Result<(), _> = Err(std::io::Error::from_raw_os_error(libc::EACCES));
        let e = io.in_file(Path::new("x")).unwrap_err();
        assert_eq!((e.kind, e.errno()), (ErrorKind::Io, libc::EACCES));
        assert_eq!(e.path.as_deref(), Some(Path::new("x")));

        let e = Error::io(libc::EIO, "refused");
        assert_eq!(
            (e.kind, e.errno(), e.reason.as_str()),
            (ErrorKind::Io, libc::EIO, "refused")
        );
        assert_eq!(Error::changed("cut").kind, ErrorKind::Changed);
    }

    #[test]
    fn every_kind_of_io_error_has_one_errno() {
        use std::io::{Error as E, ErrorKind as K};
        // (The error, its errno, and whether it names one.)
        let table: [(E, i32, bool); 6] = [
            (E::from_raw_os_error(libc::EACCES), libc::EACCES, true),
            (E::from_raw_os_error(libc::EMFILE), libc::EMFILE, true),
            (io_err(libc::ETIMEDOUT, "slow"), libc::ETIMEDOUT, true),
            (io_err(libc::ENOTDIR, "an object"), libc::ENOTDIR, true),
            (E::new(K::NotFound, "gone"), libc::ENOENT, true),
            (E::other("odd"), libc::EIO, false),
        ];
        for (e, want, named) in table {
            assert_eq!(errno_of(&e), want, "{e}");
            let d = Error::from(e);
            assert_eq!((d.kind, d.errno()), (ErrorKind::Io, want), "{d}");
            assert_eq!(d.errno, named.then_some(want), "{d}");
        }
        let eof = Error::from(E::from(K::UnexpectedEof));
        assert_eq!((eof.kind, eof.errno()), (ErrorKind::Truncated, libc::EIO));
        for kind in [
            ErrorKind::Truncated,
            ErrorKind::Corrupt,
            ErrorKind::Unsupported,
            ErrorKind::Checksum,
            ErrorKind::Changed,
            ErrorKind::Missing,
        ] {
            assert_eq!(Error::new(kind, "x").errno(), libc::EIO, "{kind:?}");
        }
        assert_eq!(io_err(libc::ETIMEDOUT, "slow").to_string(), "slow");
    }
}
