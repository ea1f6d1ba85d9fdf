//! The crate's errors, and the one place it names errno values.
//!
//! Every failure the crate returns is an `std::io::Error` that stands for
//! an errno ([`io_err`], mapped back by [`errno_of`], both the decoder's:
//! one mapping for the workspace), with a message saying what failed; a
//! GET fails with a [`FetchError`] first, which becomes one of those (or
//! the decoder's error, for a read). The constructors below are named by
//! what happened; each says the errno it stands for.

pub(crate) use blosc_decode::error::{errno_of, io_err};
use std::io;

/// A setting that cannot work (a bad option, endpoint or file): `EINVAL`.
pub(crate) fn invalid(msg: impl Into<String>) -> io::Error {
    io_err(libc::EINVAL, msg)
}

/// The store failed, or answered something unusable: `EIO`.
pub(crate) fn failed(msg: impl Into<String>) -> io::Error {
    io_err(libc::EIO, msg)
}

/// Nothing by that name: `ENOENT`.
pub(crate) fn not_found(msg: impl Into<String>) -> io::Error {
    io_err(libc::ENOENT, msg)
}

/// The store refuses us (401, 403, a login or credential that does not
/// work): `EACCES`.
pub(crate) fn denied(msg: impl Into<String>) -> io::Error {
    io_err(libc::EACCES, msg)
}

/// An object listed as a directory: `ENOTDIR`.
pub(crate) fn not_dir(msg: impl Into<String>) -> io::Error {
    io_err(libc::ENOTDIR, msg)
}

/// Is it "nothing by that name" (`ENOENT`)?
pub(crate) fn is_not_found(e: &io::Error) -> bool {
    errno_of(e) == libc::ENOENT
}

/// Why a fetch failed.
#[derive(Clone, Debug)]
pub enum FetchError {
    /// The object is not the version that was opened (or is gone).
    Changed(String),
    /// The object is not there (404): `ENOENT` for a stat, a changed
    /// object for a read of an opened one.
    Gone(String),
    /// The server answers no byte range of it (416, or a 200 to a ranged
    /// request): `EIO`.
    NoRange(String),
    /// Anything else, with the errno to report (made by the constructors
    /// below).
    Io(i32, String),
    /// A read-ahead was called off before it finished (internal).
    Cancelled,
}

impl FetchError {
    /// The server failed, or answered something unusable: `EIO`.
    pub fn failed(msg: impl Into<String>) -> FetchError {
        FetchError::Io(libc::EIO, msg.into())
    }
    /// The store refuses us, or we have no usable credential: `EACCES`.
    pub fn denied(msg: impl Into<String>) -> FetchError {
        FetchError::Io(libc::EACCES, msg.into())
    }
    /// No complete answer within the read budget: `ETIMEDOUT`.
    pub fn timed_out(msg: impl Into<String>) -> FetchError {
        FetchError::Io(libc::ETIMEDOUT, msg.into())
    }
    /// A request that cannot be made: `EINVAL`.
    pub fn invalid(msg: impl Into<String>) -> FetchError {
        FetchError::Io(libc::EINVAL, msg.into())
    }
    /// Did the server fail to answer in time?
    pub fn is_timeout(&self) -> bool {
        matches!(self, FetchError::Io(libc::ETIMEDOUT, _))
    }
    /// Into the library's error.
    pub fn into_decode(self) -> blosc_decode::Error {
        match self {
            FetchError::Changed(m) | FetchError::Gone(m) => blosc_decode::Error::changed(m),
            FetchError::NoRange(m) => blosc_decode::Error::io(libc::EIO, m),
            FetchError::Io(n, m) => blosc_decode::Error::io(n, m),
            FetchError::Cancelled => blosc_decode::Error::io(libc::EIO, "read-ahead cancelled"),
        }
    }
    /// Into an `std::io::Error` (a changed object is `ESTALE`).
    pub fn into_io(self) -> io::Error {
        match self {
            FetchError::Changed(m) => io_err(libc::ESTALE, m),
            FetchError::Gone(m) => not_found(m),
            FetchError::NoRange(m) => failed(m),
            FetchError::Io(n, m) => io_err(n, m),
            FetchError::Cancelled => failed("read-ahead cancelled"),
        }
    }
    /// The same error, its message after `what`.
    pub fn named(self, what: &str) -> FetchError {
        match self {
            FetchError::Changed(m) => FetchError::Changed(format!("{what}: {m}")),
            FetchError::Gone(m) => FetchError::Gone(format!("{what}: {m}")),
            FetchError::NoRange(m) => FetchError::NoRange(format!("{what}: {m}")),
            FetchError::Io(n, m) => FetchError::Io(n, format!("{what}: {m}")),
            FetchError::Cancelled => FetchError::Cancelled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every constructor, and every way a fetch's error leaves the crate,
    /// with the errno a reader gets for it.
    #[test]
    fn each_error_is_its_errno() {
        let made: Vec<(io::Error, i32)> = vec![
            (invalid("m"), libc::EINVAL),
            (failed("m"), libc::EIO),
            (not_found("m"), libc::ENOENT),
            (denied("m"), libc::EACCES),
            (not_dir("m"), libc::ENOTDIR),
        ];
        for (e, want) in made {
            assert_eq!(errno_of(&e), want, "{e}");
            assert_eq!(e.to_string(), "m");
            assert_eq!(is_not_found(&e), want == libc::ENOENT, "{e}");
        }
        let fetch = [
            (FetchError::failed("m"), libc::EIO, libc::EIO),
            (FetchError::denied("m"), libc::EACCES, libc::EACCES),
            (FetchError::timed_out("m"), libc::ETIMEDOUT, libc::ETIMEDOUT),
            (FetchError::invalid("m"), libc::EINVAL, libc::EINVAL),
            (FetchError::Changed("m".into()), libc::ESTALE, libc::EIO),
            (FetchError::Gone("m".into()), libc::ENOENT, libc::EIO),
            (FetchError::NoRange("m".into()), libc::EIO, libc::EIO),
            (FetchError::Cancelled, libc::EIO, libc::EIO),
        ];
        for (e, io, decode) in fetch {
            let timeout = io == libc::ETIMEDOUT;
            assert_eq!(e.is_timeout(), timeout, "{e:?}");
            assert_eq!(errno_of(&e.clone().into_io()), io, "{e:?}");
            assert_eq!(e.clone().into_decode().errno(), decode, "{e:?}");
            assert_eq!(e.named("GET x").is_timeout(), timeout);
        }
    }
}
