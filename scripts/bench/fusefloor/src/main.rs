//! fusefloor MOUNTPOINT SIZE [keep_cache] [threads=N]: one read-only file
//! `data` of SIZE bytes, served from memory with the same kernel settings
//! as bloscfs (1 MiB max readahead; as many worker threads as bloscfs
//! starts by default, one per CPU it may use and at least two, or N, with
//! cloned /dev/fuse fds; the same max_background; FOPEN_KEEP_CACHE when
//! asked).

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory,
    ReplyEntry, ReplyOpen, Request,
};
use std::ffi::OsStr;
use std::time::{Duration, UNIX_EPOCH};

struct Floor {
    size: u64,
    keep: bool,
    threads: usize,
    buf: Vec<u8>,
}

fn attr(ino: u64, size: u64, dir: bool) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: if dir {
            FileType::Directory
        } else {
            FileType::RegularFile
        },
        perm: if dir { 0o555 } else { 0o444 },
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 131072,
        flags: 0,
    }
}

const TTL: Duration = Duration::from_secs(60);

impl Filesystem for Floor {
    fn init(&mut self, _r: &Request, c: &mut KernelConfig) -> std::io::Result<()> {
        let _ = c.set_max_readahead(1 << 20);
        let bg = bloscfs::fuse::max_background(self.threads);
        let _ = c.set_max_background(bg);
        let _ = c.set_congestion_threshold(bg / 4 * 3);
        Ok(())
    }
    fn lookup(&self, _r: &Request, _p: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if name == "data" {
            reply.entry(&TTL, &attr(2, self.size, false), Generation(0))
        } else {
            reply.error(Errno::ENOENT)
        }
    }
    fn getattr(&self, _r: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        reply.attr(
            &TTL,
            &attr(ino.0, if ino.0 == 2 { self.size } else { 0 }, ino.0 == 1),
        )
    }
    fn open(&self, _r: &Request, _ino: INodeNo, _f: OpenFlags, reply: ReplyOpen) {
        let f = if self.keep {
            FopenFlags::FOPEN_KEEP_CACHE
        } else {
            FopenFlags::empty()
        };
        reply.opened(FileHandle(1), f)
    }
    fn read(
        &self,
        _r: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _f: OpenFlags,
        _l: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let n = (size as u64).min(self.size.saturating_sub(offset)) as usize;
        reply.data(&self.buf[..n])
    }
    fn readdir(
        &self,
        _r: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if offset == 0 {
            let _ = reply.add(INodeNo(2), 1, FileType::RegularFile, "data");
        }
        reply.ok()
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let size: u64 = a[2].parse().unwrap();
    let keep = a.iter().skip(3).any(|s| s == "keep_cache");
    let threads = a
        .iter()
        .skip(3)
        .find_map(|s| s.strip_prefix("threads=")?.parse().ok())
        .unwrap_or_else(|| bloscfs::config::MountArgs::default().fuse_threads());
    let fs = Floor {
        size,
        keep,
        threads,
        buf: vec![7u8; 16 << 20],
    };
    let mut c = Config::default();
    c.mount_options = vec![MountOption::RO, MountOption::FSName("fusefloor".into())];
    c.n_threads = Some(threads);
    // As bloscfs: each worker thread reads requests from its own /dev/fuse clone.
    c.clone_fd = true;
    fuser::mount(fs, &a[1], &c).unwrap();
}
