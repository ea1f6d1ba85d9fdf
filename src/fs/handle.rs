//! Open file handles: each kind knows how to read itself and seek.

use super::*;
use blosc_decode::{Deferred, Served, Stream};

/// Open files and directories, by handle number.
pub(super) struct Handles {
    /// Open files, each with the attributes of its file as it was opened:
    /// what `fstat` of it says once its source path is gone or names
    /// another file.
    files: RwLock<HashMap<u64, (Arc<Handle>, Attr)>>,
    /// Open directories.
    dirs: Mutex<HashMap<u64, Arc<DirHandle>>>,
    next_fh: AtomicU64,
    /// Stamp of each inode at its last open: unchanged means the kernel may
    /// keep its page cache.
    last_open: Mutex<HashMap<u64, Stamp>>,
}

impl Handles {
    pub(super) fn new() -> Handles {
        Handles {
            files: RwLock::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            last_open: Mutex::new(HashMap::new()),
        }
    }

    fn next(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    /// A new handle number for `h`, a file whose attributes are `attr`.
    pub(super) fn add_file(&self, h: Handle, attr: Attr) -> u64 {
        let fh = self.next();
        self.files.write().insert(fh, (Arc::new(h), attr));
        fh
    }

    pub(super) fn file(&self, fh: u64) -> Result<Arc<Handle>, Error> {
        self.files
            .read()
            .get(&fh)
            .map(|(h, _)| h.clone())
            .ok_or_else(Error::bad_handle)
    }

    /// The attributes file handle `fh` was opened with.
    pub(super) fn attr(&self, fh: u64) -> Option<Attr> {
        self.files.read().get(&fh).map(|(_, a)| a.clone())
    }

    pub(super) fn remove_file(&self, fh: u64) {
        self.files.write().remove(&fh);
    }

    pub(super) fn add_dir(&self, h: DirHandle) -> u64 {
        let fh = self.next();
        self.dirs.lock().insert(fh, Arc::new(h));
        fh
    }

    pub(super) fn dir(&self, fh: u64) -> Result<Arc<DirHandle>, Error> {
        self.dirs
            .lock()
            .get(&fh)
            .cloned()
            .ok_or_else(Error::bad_handle)
    }

    pub(super) fn remove_dir(&self, fh: u64) {
        self.dirs.lock().remove(&fh);
    }

    /// Note that `ino` is opened at `stamp`: whether it was at its last
    /// open too (the kernel may keep its page cache).
    pub(super) fn opened_unchanged(&self, ino: u64, stamp: Stamp) -> bool {
        insert_capped(&mut self.last_open.lock(), ino, stamp) == Some(stamp)
    }

    /// `ino` is forgotten: its last open with it.
    pub(super) fn forget_ino(&self, ino: u64) {
        self.last_open.lock().remove(&ino);
    }
}

/// An open file.
pub(super) enum Handle {
    Container(ContainerHandle),
    Plain(PlainHandle),
}

/// An opened container.
pub(super) struct ContainerHandle {
    pub(super) container: Arc<Container>,
    /// The file whose identity the container was opened at (a sparse
    /// frame's `chunks.b2frame`)...
    pub(super) stamp_path: PathBuf,
    /// ... and that identity.
    pub(super) stamp: Option<Stamp>,
    /// The inode it was opened for.
    pub(super) ino: u64,
    /// Its reader: what decoding ahead follows.
    pub(super) stream: Stream,
}

impl Drop for ContainerHandle {
    fn drop(&mut self) {
        self.container.close_stream(&self.stream);
    }
}

/// A file served as its raw bytes.
pub(super) struct PlainHandle {
    pub(super) file: Box<dyn RawFile>,
    pub(super) path: PathBuf,
    /// The file's identity at open.
    pub(super) stamp: Stamp,
}

/// A read as the kernel sends it (see [`Fs::read_request`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadReq {
    pub(super) offset: u64,
    pub(super) size: u32,
    /// For the kernel's page cache (not `O_DIRECT`).
    pub(super) paged: bool,
}

impl ReadReq {
    /// Does a paged request reach a page past the end of a file of `len`
    /// bytes?
    fn past_end(&self, len: u64) -> bool {
        self.paged && self.offset.saturating_add(self.size as u64) > round_to_page(len)
    }
}

/// `EIO` for a file whose size is now `len`, not what the kernel holds.
fn stale(fs: &Fs, path: &Path, len: u64) -> Result<Filled, Error> {
    Err(fs.changed_while_open(
        path,
        &format!("its size is now {len}, not what the kernel holds"),
    ))
}

impl Handle {
    /// Serve `r` into `buf`; what can wait until `buf` has been used is
    /// left to `later`.
    pub(super) fn read(
        &self,
        fs: &Fs,
        r: ReadReq,
        buf: &mut Vec<u8>,
        later: &mut Deferred,
    ) -> Result<Filled, Error> {
        match self {
            Handle::Plain(h) => h.read(fs, r, buf),
            Handle::Container(h) => h.read(fs, r, buf, later),
        }
    }

    pub(super) fn lseek(&self, offset: i64, whence: i32) -> Result<i64, Error> {
        match self {
            Handle::Plain(h) => h.lseek(offset, whence),
            Handle::Container(h) => h.lseek(offset, whence),
        }
    }
}

impl PlainHandle {
    fn read(&self, fs: &Fs, r: ReadReq, buf: &mut Vec<u8>) -> Result<Filled, Error> {
        let (f, path) = (&self.file, &self.path);
        let ReadReq {
            offset,
            size,
            paged,
        } = r;
        let md = f.meta().map_err(Error::from)?;
        if !fs.raw_view_holds(path, &md, self.stamp) {
            return Err(fs.changed_while_open(path, "may now be presented as a container"));
        }
        let len = md.len;
        if r.past_end(len) {
            return stale(fs, path, len);
        }
        set_len(buf, size as usize);
        let mut done = 0;
        while done < buf.len() {
            match f.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        if paged && (done as u64) < (size as u64).min(len.saturating_sub(offset)) {
            // Cut while it was read.
            return stale(fs, path, offset + done as u64);
        }
        buf.truncate(done);
        Ok(Filled::Buf)
    }

    fn lseek(&self, offset: i64, whence: i32) -> Result<i64, Error> {
        self.file.lseek(offset, whence)
    }
}

impl ContainerHandle {
    fn read(
        &self,
        fs: &Fs,
        r: ReadReq,
        buf: &mut Vec<u8>,
        later: &mut Deferred,
    ) -> Result<Filled, Error> {
        let (c, sp) = (&self.container, &self.stamp_path);
        let ReadReq { offset, size, .. } = r;
        // A source rewritten or truncated under an open handle: EIO
        // (reopen to see the new content), never old offsets over new bytes.
        match fs.tree.stat_follow(sp) {
            Ok(m) if Some(m.stamp()) == self.stamp => {}
            _ => return Err(fs.changed_while_open(sp, "")),
        }
        let len = c.len();
        if r.past_end(len) {
            return stale(fs, sp, len);
        }
        if offset >= len {
            buf.clear();
            return Ok(Filled::Buf);
        }
        let n = (size as u64).min(len - offset) as usize;
        // (The zero buffer is made on the first read of a hole.)
        if c.is_zero(offset, n as u64) && n <= ZEROS.len() {
            let st = &c.env().stats;
            Stats::add(&st.special_bytes_served, n as u64);
            Stats::add(&st.bytes_served, n as u64);
            return Ok(Filled::Zeros(n));
        }
        set_len(buf, n);
        match c.read_shared(&self.stream, offset, buf, later) {
            Ok(Served::Buf(got)) => {
                buf.truncate(got);
                Ok(Filled::Buf)
            }
            Ok(Served::Shared(b, r)) => Ok(Filled::Shared(b, r)),
            Err(e) => {
                if e.kind == blosc_decode::ErrorKind::Changed {
                    // A file of it (a sparse frame's chunk file) was
                    // rewritten while the container's own stamp says
                    // unchanged: the next open opens it afresh.
                    fs.forget_container(self.ino, c);
                }
                // One line per (file, chunk, reason), not per read.
                let key = format!("read:{:?}:{:?}:{}", e.path, e.chunk, e.reason);
                fs.warn_once(
                    &key,
                    &format!("{e} (read of {n} bytes at offset {offset} fails with EIO; further failures like this are not logged)"),
                );
                Err(e.into())
            }
        }
    }

    /// `SEEK_DATA` / `SEEK_HOLE`: zero chunks are holes.
    fn lseek(&self, offset: i64, whence: i32) -> Result<i64, Error> {
        let c = &self.container;
        let len = c.len() as i64;
        if offset < 0 || offset >= len {
            return Err(Error::past_end());
        }
        match whence {
            libc::SEEK_SET => Ok(offset),
            libc::SEEK_DATA | libc::SEEK_HOLE => {
                match c.seek_hole_or_data(offset as u64, whence == libc::SEEK_HOLE) {
                    Ok(Some(at)) => Ok(at as i64),
                    Ok(None) => Err(Error::past_end()),
                    Err(e) => Err(e.into()),
                }
            }
            _ => Err(Error::invalid()),
        }
    }
}
