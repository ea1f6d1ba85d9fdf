//! Owner and modes of what a remote source shows (`-o uid=`, `gid=`,
//! `file_mode=`, `dir_mode=`; a store has none of its own).

use crate::config::Perms;

/// Owner and modes of every entry shown.
#[derive(Clone, Copy)]
pub struct Shown {
    pub uid: u32,
    pub gid: u32,
    pub file_mode: u32,
    pub dir_mode: u32,
}

impl Shown {
    /// `p`, with the defaults where it says nothing.
    pub fn of(p: Perms) -> Shown {
        Shown {
            // SAFETY: getuid and getgid cannot fail and touch no memory.
            uid: p.uid.unwrap_or_else(|| unsafe { libc::getuid() }),
            // SAFETY: as above.
            gid: p.gid.unwrap_or_else(|| unsafe { libc::getgid() }),
            file_mode: p.file_mode.unwrap_or(0o444),
            dir_mode: p.dir_mode.unwrap_or(0o555),
        }
    }
}
