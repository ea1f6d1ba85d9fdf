//! The thin adapter from `fuser` (the only module that names it) to
//! `fs::Fs`: the requests here, the session in `session.rs`.

mod readbuf;
mod session;

pub use session::{connected, max_background, OwnMount, Session};

use crate::fs::{self, Attr, Filled, Fs, Kind, ZEROS};
use crate::interrupts::{Answer, InFlight, Outcome};
use crate::local::Caller;
use blosc_decode::Deferred;
use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyInterrupt, ReplyLseek, ReplyOpen, ReplyStatfs,
    ReplyXattr, Request, RequestId,
};
use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Duration;

/// The library's log target (its messages are filtered by `mount`).
pub const LOG_TARGET: &str = "fuser";

/// Attributes and entries may be cached by the kernel this long; changed
/// sources are noticed on the next lookup/open after that.
const TTL: Duration = Duration::from_secs(1);

pub struct BloscFuse {
    pub fs: Arc<Fs>,
    /// Log every request (`-d`).
    pub debug: bool,
    /// Check each open against the file's attributes as they are then
    /// (`default_permissions`, which `allow_other` brings: the kernel checks
    /// the attributes it holds, up to [`TTL`] old).
    pub check_access: bool,
    /// Serve extended attributes (`-o xattr`). Without, `getxattr` and
    /// `listxattr` are `ENOSYS` and the kernel asks no more: `ls -l` asks
    /// for two attributes of every entry, one request each when served,
    /// which in a directory of 100k entries costs more than the listing.
    pub xattr: bool,
    /// FUSE worker threads (`-o threads`): what the kernel may queue for
    /// us is sized by them ([`max_background`]).
    pub threads: usize,
    /// Our mount, once it is up.
    pub own: Arc<std::sync::OnceLock<OwnMount>>,
    /// Requests that may wait (on a remote server), which an interrupt
    /// answers `EINTR` at once.
    pub calls: InFlight,
}

/// The replies of requests that may wait: each can be answered `EINTR`.
trait Fails: Answer {
    fn fail(self, e: Errno);
}

macro_rules! fails {
    ($($t:ty),*) => {$(
        impl Answer for $t {
            fn interrupted(self) {
                self.error(Errno::EINTR)
            }
        }
        impl Fails for $t {
            fn fail(self, e: Errno) {
                self.error(e)
            }
        }
    )*};
}

fails!(
    ReplyAttr,
    ReplyData,
    ReplyDirectory,
    ReplyDirectoryPlus,
    ReplyEntry,
    ReplyLseek,
    ReplyOpen,
    ReplyStatfs,
    ReplyXattr
);

fn attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.atime,
        mtime: a.mtime,
        ctime: a.ctime,
        crtime: a.ctime,
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: a.blksize,
        flags: 0,
    }
}

fn file_type(k: Kind) -> FileType {
    match k {
        Kind::Dir => FileType::Directory,
        Kind::File => FileType::RegularFile,
        Kind::Symlink => FileType::Symlink,
    }
}

/// The reply to a failure of the presented tree: its errno, as decided
/// (and logged) there.
fn err(e: fs::Error) -> Errno {
    Errno::from_i32(e.errno())
}

impl BloscFuse {
    fn trace(&self, what: std::fmt::Arguments) {
        if self.debug {
            log::debug!("{what}");
        }
    }

    /// Serve request `req`, which may wait: `work`, then `ok` with its
    /// result (an error answered as such). Interrupted meanwhile, the
    /// request is answered `EINTR` at once, and the result the kernel
    /// never gets goes to `undo`.
    fn serve<R: Fails, T>(
        &self,
        req: &Request,
        reply: R,
        work: impl FnOnce() -> Result<T, fs::Error>,
        ok: impl FnOnce(R, T),
        undo: impl FnOnce(T),
    ) {
        let unique = req.unique().0;
        let Some(call) = self.calls.start(unique, reply) else {
            return;
        };
        let r = work();
        match (call.finish(), r) {
            (Some(reply), Ok(v)) => ok(reply, v),
            (Some(reply), Err(e)) => reply.fail(err(e)),
            (None, Ok(v)) => {
                self.trace(format_args!("request {unique} was interrupted: undone"));
                undo(v)
            }
            (None, Err(_)) => {}
        }
    }
}

impl Filesystem for BloscFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_readahead(1 << 20);
        // Nothing is written: the largest request is a read, and an
        // io_uring queue's buffers are sized by the largest write.
        let _ = config.set_max_write(readbuf::REQUEST_MAX as u32);
        let bg = max_background(self.threads);
        let _ = config.set_max_background(bg);
        let _ = config.set_congestion_threshold(bg / 4 * 3);
        // `ls -l` gets every entry's attributes with the listing; a plain
        // `ls` or `find` gets names only (the kernel chooses).
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_DO_READDIRPLUS);
        // Before the mount answers, what the first requests would otherwise
        // pay for: reply buffers and decoding state (zstd contexts, scratch
        // buffers; the CPU's features asked) for as many workers as the
        // CPUs run at once (a remote mount's 32 threads mostly wait on the
        // network; the others make theirs on first use), and the mount
        // table our own mount just changed.
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        readbuf::prepare(self.threads.min(cpus));
        blosc_decode::codec::prepare(self.threads.min(cpus));
        self.fs.mounted();
        Ok(())
    }

    /// Called once every worker has stopped. When the connection is gone
    /// (unmounted from outside), the process ends here: the FUSE library
    /// would otherwise unmount the mount point on its way out, which by
    /// then may hold a new mount (a remount right after the unmount) that
    /// is not ours. A mount left dead by an aborted connection (its mount
    /// point answers `ENOTCONN`) is detached.
    fn destroy(&mut self) {
        let Some(OwnMount { path: mp, dev, fd }) = self.own.get() else {
            return;
        };
        if connected(*fd) {
            return; // still ours: the library unmounts it
        }
        if crate::mount_table::still_mounted(mp, dev)
            && std::fs::metadata(mp).err().map(|e| e.kind())
                == Some(std::io::ErrorKind::NotConnected)
        {
            crate::mount_table::detach(mp);
        }
        log::info!("unmounted {}", mp.display());
        std::process::exit(0);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.fs.forget(ino.0, nlookup);
    }

    fn interrupt(&self, _req: &Request, unique: RequestId, reply: ReplyInterrupt) {
        let o = self.calls.interrupt(unique.0);
        self.trace(format_args!("interrupt({}): {o:?}", unique.0));
        match o {
            Outcome::Again => reply.again(),
            Outcome::Answered | Outcome::Finished | Outcome::Ignored => reply.done(),
        }
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.trace(format_args!("lookup({}, {name:?})", parent.0));
        self.serve(
            req,
            reply,
            || self.fs.lookup(parent.0, name),
            |reply, a| reply.entry(&TTL, &attr(&a), Generation(0)),
            |a| self.fs.forget(a.ino, 1),
        );
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        self.trace(format_args!("getattr({})", ino.0));
        self.serve(
            req,
            reply,
            || self.fs.getattr_open(ino.0, fh.map(|f| f.0)),
            |reply, a| reply.attr(&TTL, &attr(&a)),
            drop,
        );
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        self.serve(
            req,
            reply,
            || self.fs.readlink(ino.0),
            |reply, t| reply.data(&t),
            drop,
        );
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.trace(format_args!("open({}, {:#x})", ino.0, flags.0));
        let write = (flags.0 & libc::O_ACCMODE) != libc::O_RDONLY || flags.0 & libc::O_TRUNC != 0;
        let caller = Caller {
            uid: req.uid(),
            gid: req.gid(),
            pid: req.pid(),
        };
        let caller = self.check_access.then_some(&caller);
        self.serve(
            req,
            reply,
            || self.fs.open_as(ino.0, write, caller),
            |reply, (fh, keep)| {
                let f = if keep {
                    FopenFlags::FOPEN_KEEP_CACHE
                } else {
                    FopenFlags::empty()
                };
                reply.opened(FileHandle(fh), f)
            },
            |(fh, _)| self.fs.release(fh),
        );
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.trace(format_args!(
            "read({}, fh {}, {offset}, {size})",
            ino.0, fh.0
        ));
        // Work that can wait until the reply has gone (caching the rest of
        // a block a small read needed) is left to `later`, run after it.
        let mut later = Deferred::new();
        let Some(call) = self.calls.start(req.unique().0, reply) else {
            return;
        };
        readbuf::with(|b| {
            let paged = flags.0 & libc::O_DIRECT == 0;
            let r = self
                .fs
                .read_request(fh.0, offset, size, paged, b, &mut later);
            let Some(reply) = call.finish() else {
                if let Ok(Filled::Shared(span, _)) = r {
                    self.fs.recycle(span);
                }
                return;
            };
            match r {
                Ok(Filled::Buf) => reply.data(b),
                Ok(Filled::Zeros(n)) => reply.data(&ZEROS[..n]),
                Ok(Filled::Shared(span, r)) => {
                    reply.data(&span[r]);
                    self.fs.recycle(span);
                }
                Err(e) => reply.error(err(e)),
            }
        });
        later.run();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.fs.release(fh.0);
        reply.ok();
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.trace(format_args!("opendir({})", ino.0));
        self.serve(
            req,
            reply,
            || self.fs.opendir(ino.0),
            |reply, fh| reply.opened(FileHandle(fh), FopenFlags::empty()),
            |fh| self.fs.releasedir(fh),
        );
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.trace(format_args!("readdir({}, {offset})", ino.0));
        let Some(call) = self.calls.start(req.unique().0, reply) else {
            return;
        };
        // Interrupted, the reply is gone: no more entries.
        let r = self.fs.readdir_at(fh.0, offset, false, |e| {
            call.with(|r| r.add(INodeNo(e.ino), e.next, file_type(e.kind), e.name))
                .unwrap_or(true)
        });
        match (call.finish(), r) {
            (Some(reply), Ok(())) => reply.ok(),
            (Some(reply), Err(e)) => reply.error(err(e)),
            (None, _) => {}
        }
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        self.trace(format_args!("readdirplus({}, {offset})", ino.0));
        let Some(call) = self.calls.start(req.unique().0, reply) else {
            return;
        };
        // Entries taken, other than `.` and `..`, are lookups: forgotten
        // again if the kernel never gets them.
        let mut taken = Vec::new();
        let r = self.fs.readdir_at(fh.0, offset, true, |e| {
            let a = e
                .attr
                .as_ref()
                .map(attr)
                .expect("readdir_at(plus) gives attributes");
            let dot = e.name == "." || e.name == "..";
            let full = call
                .with(|r| r.add(INodeNo(e.ino), e.next, e.name, &TTL, &a, Generation(0)))
                .unwrap_or(true);
            if !full && !dot {
                taken.push(e.ino);
            }
            full
        });
        match (call.finish(), r) {
            (Some(reply), Ok(())) => reply.ok(),
            (Some(reply), Err(e)) => reply.error(err(e)),
            (None, Ok(())) => taken.iter().for_each(|&ino| self.fs.forget(ino, 1)),
            (None, Err(_)) => {}
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.fs.releasedir(fh.0);
        reply.ok();
    }

    fn statfs(&self, req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.serve(
            req,
            reply,
            || self.fs.statfs(),
            |reply, s| {
                reply.statfs(
                    s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
                )
            },
            drop,
        );
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if !self.xattr {
            return reply.error(Errno::ENOSYS);
        }
        let work = || {
            let mut v = self.fs.getxattr(ino.0, name)?;
            if ino.0 == fs::ROOT_INO && name == "user.bloscfs.stats" {
                // The transport's own counter, which only this adapter sees.
                v.extend(format!("fuse_ring_requests={}\n", fuser::uring_requests()).bytes());
            }
            Ok(v)
        };
        self.serve(req, reply, work, |r, v| xattr_reply(r, &v, size), drop);
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        if !self.xattr {
            return reply.error(Errno::ENOSYS);
        }
        let work = || self.fs.listxattr(ino.0);
        self.serve(req, reply, work, |r, v| xattr_reply(r, &v, size), drop);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        // Terminal and other device ioctls (isatty from shells) do not apply.
        reply.error(Errno::ENOTTY);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        if mask.contains(AccessFlags::W_OK) {
            reply.error(Errno::EROFS)
        } else {
            reply.ok()
        }
    }

    fn lseek(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        self.serve(
            req,
            reply,
            || self.fs.lseek(fh.0, offset, whence),
            |reply, o| reply.offset(o),
            drop,
        );
    }
}

/// An extended attribute's value or a list of names, `v`, for a buffer of
/// `size` (0: how large it is).
fn xattr_reply(reply: ReplyXattr, v: &[u8], size: u32) {
    match v.len() {
        n if size == 0 => reply.size(n as u32),
        n if n <= size as usize => reply.data(v),
        _ => reply.error(Errno::ERANGE),
    }
}
