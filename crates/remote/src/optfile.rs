//! Files named by options (`-o ca_file=`, `-o password_file=`): read only
//! if they are regular files (a FIFO, a device or a directory is refused
//! without blocking on it), up to a bound, and a secret only if neither
//! its group nor others may read it.

use crate::error::invalid;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The most a `ca_file` may hold.
pub const MAX_CA_FILE: u64 = 4 << 20;
/// The most a `password_file` may hold.
pub const MAX_PASSWORD_FILE: u64 = 64 << 10;

/// What a file named by an option must be.
pub struct Rules {
    /// The option, for messages (`ca_file`).
    pub option: &'static str,
    /// The most bytes it may hold.
    pub max: u64,
    /// A secret: refused if its group or others may read it.
    pub secret: bool,
}

/// The bytes of `file`, the file option `rules` describe: `EINVAL` with
/// the reason if it is not a regular file, is longer than allowed, or
/// (a secret) is readable by others.
pub fn read(file: &Path, rules: &Rules) -> std::io::Result<Vec<u8>> {
    let bad = |why: String| invalid(format!("{} {}: {why}", rules.option, file.display()));
    // O_NONBLOCK: opening a FIFO does not wait for a writer.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(file)
        .map_err(|e| bad(e.to_string()))?;
    let md = f.metadata().map_err(|e| bad(e.to_string()))?;
    if !md.file_type().is_file() {
        return Err(bad(format!("{}, not a regular file", kind(&md))));
    }
    let mode = md.mode() & 0o7777;
    if rules.secret && mode & 0o044 != 0 {
        return Err(invalid(format!(
            "{} {} is readable by its group or others (mode {mode:04o}): chmod 600 it",
            rules.option,
            file.display()
        )));
    }
    let too_long = || bad(format!("more than {} bytes", rules.max));
    if md.len() > rules.max {
        return Err(too_long());
    }
    let mut out = Vec::with_capacity(md.len() as usize);
    f.take(rules.max + 1)
        .read_to_end(&mut out)
        .map_err(|e| bad(e.to_string()))?;
    if out.len() as u64 > rules.max {
        return Err(too_long());
    }
    Ok(out)
}

/// What a file that is not a regular file is, for a message.
fn kind(md: &std::fs::Metadata) -> &'static str {
    let t = md.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const CA: Rules = Rules {
        option: "ca_file",
        max: 100,
        secret: false,
    };
    const PW: Rules = Rules {
        option: "password_file",
        max: 100,
        secret: true,
    };

    fn err(file: &Path, rules: &Rules) -> String {
        read(file, rules).unwrap_err().to_string()
    }

    #[test]
    fn only_regular_files_are_read_never_blocking() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(err(&fifo, &CA).contains("a FIFO, not a regular file"));
        assert!(err(Path::new("/dev/zero"), &CA).contains("a character device"));
        assert!(err(d.path(), &CA).contains("a directory"));
        let e = err(&d.path().join("missing"), &CA);
        assert!(e.starts_with("ca_file ") && e.contains("missing"), "{e}");
    }

    #[test]
    fn files_past_their_bound_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, [b'x'; 100]).unwrap();
        assert_eq!(read(&f, &CA).unwrap().len(), 100);
        std::fs::write(&f, [b'x'; 101]).unwrap();
        assert!(err(&f, &CA).contains("more than 100 bytes"));
    }

    #[test]
    fn a_secret_readable_by_others_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("pw");
        std::fs::write(&f, "pw\n").unwrap();
        for mode in [0o644, 0o640, 0o604] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = err(&f, &PW);
            assert!(
                e.contains(&format!("(mode {mode:04o}): chmod 600 it")),
                "{e}"
            );
            assert_eq!(read(&f, &CA).unwrap(), b"pw\n");
        }
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read(&f, &PW).unwrap(), b"pw\n");
    }
}
