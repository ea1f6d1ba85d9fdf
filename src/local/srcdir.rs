//! Directories whose files the daemon opens for whoever reads through the
//! mount (a sparse frame's index and chunk files), and who may read them.
//!
//! With `allow_other` the daemon reads every file with its own rights
//! (root's, when root mounts) for every user, so two rules keep it from
//! reading for a user what that user could not read from the source:
//!
//! - A frame's files are opened relative to its directory's descriptor
//!   (`openat`), never by a path looked up again, and a name that is a
//!   symbolic link is followed only to a regular file owned by the
//!   directory's owner ([`SourceDir::open_file`]). Whoever can make a
//!   directory cannot point its chunk names at files they cannot read.
//! - A frame is presented with read bits no wider than every file it
//!   exposes ([`SourceDir::frame_access`]), and an open is checked against
//!   those bits as they are then ([`Caller::may_read`]).

use blosc_decode::error::{Context, Error, Result};
use std::ffi::CString;
use std::fs::{File, Metadata};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A directory opened once; its files are opened relative to it.
pub struct SourceDir {
    file: File,
    path: PathBuf,
    md: Metadata,
}

/// `openat(dir, name, flags)` as a `File`.
fn open_at(dir: &File, name: &CString, flags: libc::c_int) -> std::io::Result<File> {
    // SAFETY: a valid descriptor and NUL-terminated name; the descriptor
    // returned is owned by the `File` made from it.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// `fstatat(dir, name)` following a symbolic link: (is a regular file, owner).
fn stat_at(dir: &File, name: &CString) -> std::io::Result<(bool, u32)> {
    // SAFETY: `st` is written by fstatat before it is read.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor, NUL-terminated name and stat buffer.
    if unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((st.st_mode & libc::S_IFMT == libc::S_IFREG, st.st_uid))
}

/// A file the rules refuse to open: `EIO`, with the reason.
fn refused(reason: String) -> Error {
    crate::fs::Error::io().in_source(reason)
}

impl SourceDir {
    /// Open the directory `path`. With `follow`, a symbolic link as its last
    /// component is followed (a path given on the command line); without,
    /// it is refused (`ELOOP`: a name in the mounted tree that was checked
    /// not to be a link).
    pub fn open(path: &Path, follow: bool) -> std::io::Result<SourceDir> {
        let mut flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        if !follow {
            flags |= libc::O_NOFOLLOW;
        }
        let file = super::longpath::at(path, |p| {
            let c = CString::new(p.as_os_str().as_bytes())?;
            // SAFETY: a NUL-terminated path; the descriptor goes to a `File`.
            let fd = unsafe { libc::open(c.as_ptr(), flags) };
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: `fd` was just opened and is owned by nobody else.
            Ok(unsafe { File::from_raw_fd(fd) })
        })?;
        let md = file.metadata()?;
        Ok(SourceDir {
            file,
            path: path.to_path_buf(),
            md,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory's metadata as it was opened.
    pub fn metadata(&self) -> &Metadata {
        &self.md
    }

    /// Is this directory the file `md` describes (same device and inode)?
    pub fn is(&self, md: &Metadata) -> bool {
        self.md.dev() == md.dev() && self.md.ino() == md.ino()
    }

    /// Open `name` in this directory for reading. A symbolic link is
    /// followed only to a regular file owned by the directory's owner
    /// (checked before it is opened, so a device is never opened, and again
    /// on what was opened); anything else is refused with `EIO` and a reason
    /// naming the file. Whatever was opened must be a regular file (opened
    /// non-blocking, so a fifo never hangs us). Returns its metadata with it.
    pub fn open_file(&self, name: &str) -> Result<(File, Metadata)> {
        let at = self.path.join(name);
        let c = CString::new(name)
            .map_err(std::io::Error::from)
            .in_file(&at)?;
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        let file = match open_at(&self.file, &c, flags | libc::O_NOFOLLOW) {
            Ok(f) => f,
            // With O_NOFOLLOW, ELOOP: the name is a symbolic link.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                let (regular, uid) = stat_at(&self.file, &c).in_file(&at)?;
                self.check_link(regular, uid).in_file(&at)?;
                let f = open_at(&self.file, &c, flags).in_file(&at)?;
                let md = f.metadata().in_file(&at)?;
                self.check_link(md.is_file(), md.uid()).in_file(&at)?;
                f
            }
            Err(e) => return Err(Error::from(e).in_file(&at)),
        };
        let md = file.metadata().in_file(&at)?;
        if !md.is_file() {
            return Err(
                refused("not a regular file (a fifo, socket or device)".into()).in_file(&at),
            );
        }
        blosc_decode::io::set_blocking(&file);
        Ok((file, md))
    }

    /// May a symbolic link in this directory to a file (regular or not,
    /// owned by `uid`) be followed?
    fn check_link(&self, regular: bool, uid: u32) -> Result<()> {
        if !regular {
            return Err(refused(
                "a symbolic link to something other than a regular file: not followed".into(),
            ));
        }
        if uid != self.md.uid() {
            return Err(refused(format!(
                "a symbolic link to a file owned by uid {uid}, not by the frame directory's owner (uid {}): not followed",
                self.md.uid()
            )));
        }
        Ok(())
    }

    /// The read bits (of 0o444) a sparse frame in this directory may be
    /// presented with, with the directory's owner and group, and the
    /// 512-byte blocks of all its entries. A class (user, group, other)
    /// gets read only if the directory gives it read and search and every
    /// index and chunk file (`chunks.b2frame`, `XXXXXXXX.chunk`; a link
    /// counts as the file it leads to) gives it read ([`file_gives`]). One
    /// pass over the directory, one `fstatat` an entry (and one more a link).
    pub fn frame_access(&self) -> (u16, u64) {
        let d = self.md.mode();
        let mut perm = 0u16;
        for (rx, r) in [(0o500, 0o400), (0o050, 0o040), (0o005, 0o004)] {
            if d & rx == rx {
                perm |= r;
            }
        }
        // The entries of the directory opened, not of whatever its path
        // names now.
        let here = PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()));
        let entries = std::fs::read_dir(&here).or_else(|_| std::fs::read_dir(&self.path));
        let Ok(entries) = entries else {
            return (0, 0);
        };
        let mut blocks = 0u64;
        for e in entries.flatten() {
            let Ok(lmd) = e.metadata() else { continue };
            blocks += lmd.blocks();
            if !exposed(e.file_name().as_bytes()) {
                continue;
            }
            let md = if lmd.file_type().is_symlink() {
                // A link that leads nowhere cannot be read: nothing shown.
                match std::fs::metadata(e.path()) {
                    Ok(m) => m,
                    Err(_) => continue,
                }
            } else {
                lmd
            };
            perm &= file_gives(&md, self.md.uid(), self.md.gid());
        }
        (perm, blocks)
    }
}

/// Is `name` one a sparse frame's data is read from?
fn exposed(name: &[u8]) -> bool {
    name == b"chunks.b2frame"
        || (name.len() == 14
            && name.ends_with(b".chunk")
            && name[..8]
                .iter()
                .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b)))
}

/// The read bits (of 0o444) a file gives the classes of a directory owned
/// by `uid` and group `gid`. A file of the directory's owner gives that
/// owner its owner bit; a member of the directory's group its group bit if
/// the file is of that group (else only what both its group and others
/// get); others its others' bit (likewise). A file owned by anyone else
/// counts only for what it gives everyone (owner, group and others alike).
pub fn file_gives(md: &Metadata, uid: u32, gid: u32) -> u16 {
    let m = md.mode();
    let (u, g, o) = (m & 0o400 != 0, m & 0o040 != 0, m & 0o004 != 0);
    let all = u && g && o;
    let (ru, rg, ro) = if md.uid() != uid {
        (all, all, all)
    } else if md.gid() != gid {
        (u, g && o, g && o)
    } else {
        (u, g, o)
    };
    [(ru, 0o400), (rg, 0o040), (ro, 0o004)]
        .iter()
        .filter(|(r, _)| *r)
        .fold(0, |m, (_, bit)| m | bit)
}

/// Who sent a request: the kernel's uid, gid and process id.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

impl Caller {
    /// May this caller read a file presented with `perm`, owner `uid` and
    /// group `gid`? As the kernel decides: root may; the owner by the owner
    /// bit; a member of the group (primary, or supplementary from
    /// `/proc/PID/status`; unknown counts as not a member) by the group bit;
    /// anyone else by the others' bit.
    pub fn may_read(&self, perm: u16, uid: u32, gid: u32) -> bool {
        if self.uid == 0 {
            return true;
        }
        let bit = if self.uid == uid {
            0o400
        } else if self.gid == gid || self.groups().contains(&gid) {
            0o040
        } else {
            0o004
        };
        perm & bit != 0
    }

    /// The caller's supplementary groups (none if they cannot be read).
    fn groups(&self) -> Vec<u32> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid));
        status
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("Groups:").map(|g| {
                        g.split_whitespace()
                            .filter_map(|n| n.parse().ok())
                            .collect()
                    })
                })
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_names_are_the_index_and_chunk_files() {
        for n in ["chunks.b2frame", "00000000.chunk", "DEADBEEF.chunk"] {
            assert!(exposed(n.as_bytes()), "{n}");
        }
        for n in [
            "deadbeef.chunk",
            "0000000.chunk",
            "000000000.chunk",
            "x.b2frame",
        ] {
            assert!(!exposed(n.as_bytes()), "{n}");
        }
    }

    /// A link in the directory is followed only to a regular file of the
    /// directory's owner; plain files and such links open, and the
    /// refusals are `EIO` naming the file and the reason.
    #[test]
    fn links_are_followed_only_to_files_of_the_directorys_owner() {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        let (d, elsewhere) = (t.path().join("f.b2frame"), t.path().join("x"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(d.join("00000000.chunk"), b"own").unwrap();
        std::fs::write(elsewhere.join("mine"), b"mine").unwrap();
        symlink("../x/mine", d.join("00000001.chunk")).unwrap();
        // A file of another owner: made so as root, else one root owns.
        let theirs = elsewhere.join("theirs");
        std::fs::write(&theirs, b"theirs").unwrap();
        // SAFETY: geteuid has no preconditions.
        let other = if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
            theirs
        } else {
            PathBuf::from("/etc/passwd")
        };
        symlink(&other, d.join("00000002.chunk")).unwrap();
        symlink("../x", d.join("00000003.chunk")).unwrap();
        let fifo = CString::new(elsewhere.join("fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        symlink("../x/fifo", d.join("00000004.chunk")).unwrap();
        symlink("../x/none", d.join("00000005.chunk")).unwrap();

        let dir = SourceDir::open(&d, false).unwrap();
        let read = |n: &str| -> Result<Vec<u8>> {
            let (mut f, _) = dir.open_file(n)?;
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut f, &mut v).unwrap();
            Ok(v)
        };
        assert_eq!(read("00000000.chunk").unwrap(), b"own");
        assert_eq!(read("00000001.chunk").unwrap(), b"mine");
        for (n, why) in [
            ("00000002.chunk", "not by the frame directory's owner"),
            ("00000003.chunk", "other than a regular file"),
            ("00000004.chunk", "other than a regular file"),
        ] {
            let e = read(n).unwrap_err();
            assert_eq!(e.errno(), libc::EIO, "{n}: {e}");
            assert!(e.to_string().contains(why), "{n}: {e}");
            assert_eq!(e.path.as_deref(), Some(d.join(n).as_path()), "{e}");
        }
        let e = read("00000005.chunk").unwrap_err();
        assert_eq!(e.errno(), libc::ENOENT, "{e}");
        // A directory given as a link is refused unless followed.
        let link = t.path().join("link.b2frame");
        symlink("f.b2frame", &link).unwrap();
        assert!(SourceDir::open(&link, false).is_err());
        assert!(SourceDir::open(&link, true).unwrap().is(dir.metadata()));
    }

    #[test]
    fn root_reads_and_others_by_their_class() {
        let c = |uid, gid| Caller { uid, gid, pid: 0 };
        assert!(c(0, 0).may_read(0, 1, 1));
        assert!(c(5, 9).may_read(0o400, 5, 1));
        assert!(!c(5, 9).may_read(0o044, 5, 1));
        assert!(c(6, 1).may_read(0o040, 5, 1));
        assert!(!c(6, 1).may_read(0o404, 5, 1));
        assert!(c(6, 2).may_read(0o004, 5, 1));
        assert!(!c(6, 2).may_read(0o440, 5, 1));
    }
}
