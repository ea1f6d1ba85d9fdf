//! The crate's errors: every failure is an `std::io::Error` that stands for
//! an errno ([`io_err`], mapped back by [`errno_of`], both the decoder's:
//! one mapping for the workspace), with a message saying what failed.

pub(crate) use blosc_decode::error::{errno_of, io_err};

/// A setting that cannot work (a bad option, endpoint or file): `EINVAL`.
pub(crate) fn invalid(msg: impl Into<String>) -> std::io::Error {
    io_err(libc::EINVAL, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_setting_is_einval_with_its_message() {
        let e = invalid("-o user= needs -o password_file=");
        assert_eq!(errno_of(&e), libc::EINVAL);
        assert_eq!(e.to_string(), "-o user= needs -o password_file=");
    }
}
