//! The mount table (`/proc/self/mountinfo`): where a mount may go, whether
//! ours is still there, and the FUSE mounts met inside the source tree.
//!
//! The daemon never looks into a FUSE mount below its source: not its own
//! mount (reached there through a bind mount or mount propagation), and not
//! another FUSE file system (which could be a bloscfs whose source holds our
//! mount point: each daemon would wait on the other for ever, and the
//! readers with them, unkillably). Such a mount point is left out of
//! listings, a lookup of its name fails with `ENOENT`, and a path below it
//! is not looked at. The table is read again whenever the kernel says the
//! mounts changed (`poll` of the open mountinfo file), so the check costs
//! one system call while they do not.

use parking_lot::Mutex;
use std::io::{Read, Seek};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The mount point (field 5) and file-system type of each line of a
/// mountinfo table, unescaped.
pub fn parse_mountinfo(text: &str) -> Vec<(PathBuf, String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let Some(dash) = f.iter().position(|&x| x == "-") else {
            continue;
        };
        if f.len() > 4 && dash + 1 < f.len() {
            out.push((
                PathBuf::from(unescape(f[4])),
                f[dash + 1].to_string(),
                f[2].to_string(),
            ));
        }
    }
    out
}

/// Undo mountinfo's octal escapes of space, tab, newline and backslash.
pub fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Is this file-system type a FUSE one (`fuse`, `fuseblk`, `fuse.NAME`)?
pub fn is_fuse(fstype: &str) -> bool {
    fstype == "fuse" || fstype == "fuseblk" || fstype.starts_with("fuse.")
}

/// The FUSE mount points strictly inside `root`, kept current.
pub struct FuseMounts {
    root: PathBuf,
    /// The open mountinfo file (`None`: unreadable; nothing is skipped).
    file: Mutex<Option<std::fs::File>>,
    inside: Mutex<Arc<Vec<PathBuf>>>,
}

impl FuseMounts {
    pub fn new(root: &Path) -> FuseMounts {
        let file = std::fs::File::open("/proc/self/mountinfo").ok();
        let m = FuseMounts {
            root: root.to_path_buf(),
            file: Mutex::new(file),
            inside: Mutex::new(Arc::new(Vec::new())),
        };
        let mut f = m.file.lock();
        if let Some(file) = f.as_mut() {
            changed(file);
            *m.inside.lock() = Arc::new(m.read(file));
        }
        drop(f);
        m
    }

    /// Read the table again from the start of `file`.
    fn read(&self, file: &mut std::fs::File) -> Vec<PathBuf> {
        let mut text = String::new();
        if file.rewind().is_err() || file.read_to_string(&mut text).is_err() {
            return Vec::new();
        }
        parse_mountinfo(&text)
            .into_iter()
            .filter(|(p, t, _)| is_fuse(t) && p.starts_with(&self.root) && *p != self.root)
            .map(|(p, _, _)| p)
            .collect()
    }

    /// The FUSE mount points inside the source now.
    pub fn inside(&self) -> Arc<Vec<PathBuf>> {
        let mut f = self.file.lock();
        if let Some(file) = f.as_mut() {
            if changed(file) {
                let v = Arc::new(self.read(file));
                *self.inside.lock() = v;
            }
        }
        drop(f);
        self.inside.lock().clone()
    }

    /// Is `path` a FUSE mount point inside the source, or below one?
    pub fn blocks(&self, path: &Path) -> bool {
        let inside = self.inside();
        !inside.is_empty() && inside.iter().any(|m| path.starts_with(m))
    }
}

/// Has the mount table changed since `file` was last polled? (The kernel
/// flags a change once per poll.)
fn changed(file: &std::fs::File) -> bool {
    let mut p = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLPRI,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no timeout.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r > 0 && p.revents & (libc::POLLPRI | libc::POLLERR) != 0
}

/// The topmost mount at `mp`, if any: its device (maj:min) and type.
pub fn mounted_at(mp: &std::path::Path) -> Option<(String, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    parse_mountinfo(&info)
        .into_iter()
        .rev()
        .find(|(p, _, _)| p == mp)
        .map(|(_, t, dev)| (dev, t))
}

/// Is a mount of device `dev` (maj:min) at `mp`? (Device numbers are
/// reused: a new mount may have the number of one just unmounted.)
pub fn still_mounted(mp: &std::path::Path, dev: &str) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|info| {
            parse_mountinfo(&info)
                .iter()
                .any(|(p, _, d)| p == mp && d == dev)
        })
        // Unreadable: assume it is, as the FUSE library does.
        .unwrap_or(true)
}

/// Unmount `mp` lazily (`umount2(MNT_DETACH)`, or `fusermount3 -u -z`
/// where that is not permitted).
pub fn detach(mp: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    if let Ok(c) = std::ffi::CString::new(mp.as_os_str().as_bytes()) {
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
            return;
        }
    }
    let _ = std::process::Command::new("fusermount3")
        .args(["-u", "-z"])
        .arg(mp)
        .status();
}

/// Refuse a mount point that is the source or inside it (the daemon would
/// read its own mount: every reader, and the daemon, would wait for ever),
/// and a source inside the mount point (the mount would hide it). Both
/// paths canonical.
pub fn check_nesting(source: &std::path::Path, mp: &std::path::Path) -> Result<(), String> {
    if mp == source {
        return Err(format!(
            "mount point {} is the source itself: the file system would read its own mount; mount it elsewhere",
            mp.display()
        ));
    }
    if mp.starts_with(source) {
        return Err(format!(
            "mount point {} is inside the source {}: the file system would read its own mount; mount it outside the source",
            mp.display(),
            source.display()
        ));
    }
    if source.starts_with(mp) {
        return Err(format!(
            "source {} is inside the mount point {}: the mount would hide it",
            source.display(),
            mp.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_parse_with_escapes() {
        let t = "36 35 0:40 / /tmp/a\\040b rw,relatime shared:1 - fuse.bloscfs /src rw\n\
                 37 35 8:1 / /mnt rw - ext4 /dev/sda1 rw\n\
                 garbage line\n";
        let v = parse_mountinfo(t);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].0, PathBuf::from("/tmp/a b"));
        assert_eq!(v[0].1, "fuse.bloscfs");
        assert_eq!(v[0].2, "0:40");
        assert!(is_fuse(&v[0].1) && is_fuse("fuseblk") && !is_fuse(&v[1].1));
        assert!(!is_fuse("fusectl"));
    }

    /// With no FUSE mount inside it, nothing under the root is blocked.
    #[test]
    fn nothing_blocked_without_mounts_inside() {
        let d = tempfile::tempdir().unwrap();
        let m = FuseMounts::new(d.path());
        assert!(!m.blocks(&d.path().join("x")));
        assert!(!m.blocks(d.path()));
    }

    #[test]
    fn nesting_of_source_and_mount_point_is_refused() {
        let p = |s: &str| PathBuf::from(s);
        assert!(check_nesting(&p("/a/src"), &p("/a/mnt")).is_ok());
        assert!(check_nesting(&p("/a/src"), &p("/a/src2")).is_ok());
        let e = check_nesting(&p("/a/src"), &p("/a/src")).unwrap_err();
        assert!(e.contains("is the source itself"), "{e}");
        let e = check_nesting(&p("/a/src"), &p("/a/src/x/mnt")).unwrap_err();
        assert!(e.contains("inside the source"), "{e}");
        let e = check_nesting(&p("/a/mnt/src"), &p("/a/mnt")).unwrap_err();
        assert!(e.contains("inside the mount point"), "{e}");
        let e = check_nesting(&p("/src"), &p("/")).unwrap_err();
        assert!(e.contains("inside the mount point"), "{e}");
    }
}
