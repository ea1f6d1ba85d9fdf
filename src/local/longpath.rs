//! Source paths of any length. A system call takes a path shorter than
//! `PATH_MAX` (4096 bytes) and fails with `ENAMETOOLONG` on a longer one,
//! though a tree may be deeper than that (a 100-level tree of 60-character
//! names). Every system call the daemon makes on a source path goes through
//! [`at`]:
//!
//! - A path shorter than [`SHORT`] is used as it is: no cost.
//! - A longer one is resolved in pieces: its longest leading directories
//!   that fit are opened (`O_PATH | O_DIRECTORY`), and the next ones
//!   relative to that descriptor (`openat`), until what is left, named
//!   relative to the last descriptor as `/proc/self/fd/N/REST`, fits. The
//!   call is made on that name, and the descriptors are closed.
//!
//! Each piece is looked up as the kernel would look up the whole path: a
//! directory that is a symbolic link is followed in a piece exactly when
//! the whole path would follow it (every component but the last, which is
//! never in a directory piece), and the last component is treated as the
//! call says (`O_NOFOLLOW`, `lstat`). Running out of descriptors while the
//! pieces are opened fails with `EMFILE` or `ENFILE`, as the call itself
//! would.
//!
//! The last step goes through `/proc/self/fd` (which the daemon reads
//! anyway: its mount table) so the standard library's own calls run
//! unchanged: it makes a `Metadata` only by `stat`ing a path or a
//! descriptor, and lists a directory only by its path. Without `/proc`,
//! long paths fail (`ENOENT`) and shorter ones are served as ever.

use std::ffi::OsString;
use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Paths at least this long are resolved in pieces: `PATH_MAX` less room
/// for the `/proc/self/fd/N/` a piece is named under.
pub const SHORT: usize = libc::PATH_MAX as usize - 64;

/// Run `op` on `path`, or, for a path of [`SHORT`] bytes or more, on a
/// name of the same file relative to a directory descriptor (held open
/// while `op` runs, closed after). The name given to `op` must not be kept:
/// it names another file, or none, once `at` returns.
pub fn at<T>(path: &Path, op: impl FnOnce(&Path) -> io::Result<T>) -> io::Result<T> {
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() < SHORT {
        return op(path);
    }
    let (dir, rest) = resolve_dir(bytes)?;
    let mut name = format!("/proc/self/fd/{}/", dir.as_raw_fd()).into_bytes();
    name.extend_from_slice(rest);
    op(&PathBuf::from(OsString::from_vec(name)))
}

/// The length of the longest leading part of `b` of fewer than `max` bytes
/// that ends before a `/` (so names whole directories), if any.
fn cut(b: &[u8], max: usize) -> Option<usize> {
    let window = &b[..b.len().min(max)];
    window.iter().rposition(|&c| c == b'/').filter(|&i| i > 0)
}

/// Open `name` (relative to `dir`, or to the working directory) as a
/// directory to look things up in.
fn open_dir(dir: Option<&OwnedFd>, name: &[u8]) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(name)?;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: a valid descriptor (or AT_FDCWD) and a NUL-terminated name.
    let fd = unsafe { libc::openat(at, c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Open the leading directories of the long path `b` in pieces: the last
/// descriptor, and the rest of the path relative to it (short enough to
/// follow `/proc/self/fd/N/`). One descriptor is held at a time.
fn resolve_dir(b: &[u8]) -> io::Result<(OwnedFd, &[u8])> {
    let too_long = || io::Error::from(crate::fs::Error::name_too_long());
    let first = cut(b, SHORT).ok_or_else(too_long)?;
    let mut dir = open_dir(None, &b[..first])?;
    let mut rest = &b[first + 1..];
    while rest.len() >= SHORT {
        let n = cut(rest, SHORT).ok_or_else(too_long)?;
        dir = open_dir(Some(&dir), &rest[..n])?;
        rest = &rest[n + 1..];
    }
    Ok((dir, rest))
}

/// `std::fs::symlink_metadata`, for a path of any length.
pub fn symlink_metadata(path: &Path) -> io::Result<Metadata> {
    at(path, |p| std::fs::symlink_metadata(p))
}

/// `std::fs::metadata` (a last link followed), for a path of any length.
pub fn metadata(path: &Path) -> io::Result<Metadata> {
    at(path, |p| std::fs::metadata(p))
}

/// `std::fs::read_link`, for a path of any length.
pub fn read_link(path: &Path) -> io::Result<PathBuf> {
    at(path, |p| std::fs::read_link(p))
}

/// `opts.open(path)`, for a path of any length.
pub fn open(opts: &OpenOptions, path: &Path) -> io::Result<File> {
    at(path, |p| opts.open(p))
}

/// Is `path` a directory (a last link followed)?
pub fn is_dir(path: &Path) -> bool {
    metadata(path).is_ok_and(|m| m.is_dir())
}

/// Is `path` a regular file (a last link followed)?
pub fn is_file(path: &Path) -> bool {
    metadata(path).is_ok_and(|m| m.is_file())
}

/// The names in directory `path` (a path of any length), as they are read.
/// (Names only: a `DirEntry`'s path would name a closed descriptor's.)
pub fn read_dir_names(path: &Path) -> io::Result<impl Iterator<Item = io::Result<OsString>>> {
    Ok(at(path, |p| std::fs::read_dir(p))?.map(|e| e.map(|e| e.file_name())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A tree of `levels` 60-character directories in `top`, made one level
    /// at a time relative to the one above; the bottom's full path.
    fn deep(top: &Path, levels: usize) -> PathBuf {
        let mut dir = OwnedFd::from(File::open(top).unwrap());
        let mut path = top.to_path_buf();
        for i in 0..levels {
            let name = format!("{i:03}-{}", "d".repeat(56));
            let c = std::ffi::CString::new(name.as_str()).unwrap();
            // SAFETY: a valid descriptor and NUL-terminated name.
            let made = unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o755) };
            assert_eq!(made, 0);
            dir = open_dir(Some(&dir), name.as_bytes()).unwrap();
            path.push(name);
        }
        path
    }

    fn same(a: &Metadata, b: &Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        a.dev() == b.dev() && a.ino() == b.ino()
    }

    #[test]
    fn cuts_end_before_a_slash_inside_the_limit() {
        assert_eq!(cut(b"/a/bb/ccc", 6), Some(5));
        assert_eq!(cut(b"/a/bb/ccc", 5), Some(2));
        assert_eq!(cut(b"/abcdef", 5), None);
        assert_eq!(cut(b"a/b", 100), Some(1));
    }

    /// Short paths go to the call as they are; long ones reach the same
    /// file, whatever the call, with no descriptor left open.
    #[test]
    fn long_paths_reach_the_same_files() {
        let t = tempfile::tempdir().unwrap();
        let short = t.path().join("x");
        let seen = at(&short, |p| Ok(p.to_path_buf())).unwrap();
        assert_eq!(seen, short);

        let bottom = deep(t.path(), 150);
        assert!(bottom.as_os_str().len() > 2 * SHORT);
        // What a short path cannot reach.
        assert_eq!(
            std::fs::symlink_metadata(&bottom)
                .unwrap_err()
                .raw_os_error(),
            Some(libc::ENAMETOOLONG)
        );
        let meta = symlink_metadata(&bottom).unwrap();
        assert!(meta.is_dir() && is_dir(&bottom));
        let file = bottom.join("f");
        at(&file, |p| std::fs::write(p, b"deep")).unwrap();
        assert!(is_file(&file) && !is_dir(&file));
        let mut read = String::new();
        io::Read::read_to_string(
            &mut open(OpenOptions::new().read(true), &file).unwrap(),
            &mut read,
        )
        .unwrap();
        assert_eq!(read, "deep");
        at(&bottom.join("l"), |p| symlink("f", p)).unwrap();
        assert_eq!(read_link(&bottom.join("l")).unwrap(), Path::new("f"));
        assert!(symlink_metadata(&bottom.join("l")).unwrap().is_symlink());
        assert!(metadata(&bottom.join("l")).unwrap().is_file());
        let mut names: Vec<_> = read_dir_names(&bottom)
            .unwrap()
            .map(|n| n.unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["f", "l"]);
        let e = symlink_metadata(&bottom.join("none")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        // A link among the directories is followed, as in one lookup.
        let alias = t.path().join("alias");
        symlink(t.path().join(format!("000-{}", "d".repeat(56))), &alias).unwrap();
        let first = bottom
            .strip_prefix(t.path())
            .unwrap()
            .iter()
            .next()
            .unwrap();
        let via = alias.join(bottom.strip_prefix(t.path().join(first)).unwrap());
        assert_eq!(via.as_os_str().len(), bottom.as_os_str().len() - 55);
        assert!(same(
            &metadata(&via.join("f")).unwrap(),
            &metadata(&file).unwrap()
        ));
        // A plain file where a directory should be: ENOTDIR, as for a short path.
        let under = file.join("x");
        assert_eq!(
            symlink_metadata(&under).unwrap_err().raw_os_error(),
            Some(libc::ENOTDIR)
        );
    }
}
