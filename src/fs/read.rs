//! Reads and seeks on open handles.

use super::*;
use blosc_decode::Deferred;

impl Fs {
    /// Read up to `size` bytes at `offset` into `buf` (its length becomes the
    /// bytes read; its old contents are overwritten, not zeroed first: a
    /// 1 MiB request would otherwise be written twice).
    pub fn read_into(
        &self,
        fh: u64,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Result<Filled, i32> {
        self.read_request(fh, offset, size, false, buf, &mut Deferred::none())
    }

    /// A read as the kernel sends it. `paged`: for its page cache (not
    /// `O_DIRECT`). The kernel asks for pages only below the size it holds
    /// for the file, and takes a short answer for the end of the file: it
    /// fills the rest of the pages asked for with zeros and keeps them as
    /// the file's content. So a paged request that reaches a page past the
    /// end of the version this handle serves (the kernel's size is another
    /// version's: the source changed and the kernel has not seen it yet), or
    /// that the source shrank under while it was read, fails with `EIO`
    /// instead of being answered short. What can wait until `buf` has been
    /// used (caching the rest of a block a small read needed) is left to
    /// `later`.
    pub fn read_request(
        &self,
        fh: u64,
        offset: u64,
        size: u32,
        paged: bool,
        buf: &mut Vec<u8>,
        later: &mut Deferred,
    ) -> Result<Filled, i32> {
        let h = self.handle(fh)?;
        let stale = |path: &Path, len: u64| {
            Err(self.changed_while_open(
                path,
                &format!("its size is now {len}, not what the kernel holds"),
            ))
        };
        let past_end = |len: u64| paged && offset.saturating_add(size as u64) > round_to_page(len);
        match &*h {
            Handle::Plain {
                file: f,
                path,
                stamp,
            } => {
                let md = f.metadata().map_err(|e| errno_of(&e))?;
                if !self.raw_view_holds(path, &md, *stamp) {
                    return Err(
                        self.changed_while_open(path, "may now be presented as a container")
                    );
                }
                let len = md.len();
                if past_end(len) {
                    return stale(path, len);
                }
                set_len(buf, size as usize);
                let mut done = 0;
                while done < buf.len() {
                    match f.read_at(&mut buf[done..], offset + done as u64) {
                        Ok(0) => break,
                        Ok(n) => done += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(errno_of(&e)),
                    }
                }
                if paged && (done as u64) < (size as u64).min(len.saturating_sub(offset)) {
                    // Cut while it was read.
                    return stale(path, offset + done as u64);
                }
                buf.truncate(done);
                Ok(Filled::Buf)
            }
            Handle::Container(c, sp, stamp, ino) => {
                // A source rewritten or truncated under an open handle: EIO
                // (reopen to see the new content), never old offsets over new bytes.
                match longpath::metadata(sp) {
                    Ok(m) if Some(Stamp::of(&m)) == *stamp => {}
                    _ => return Err(self.changed_while_open(sp, "")),
                }
                let len = c.len();
                if past_end(len) {
                    return stale(sp, len);
                }
                self.read_container(c, *ino, offset, size, buf, later)
            }
        }
    }

    /// Up to `size` bytes of container `c` (inode `ino`) at `offset` into
    /// `buf`, or a hole's length when they are all zeros.
    fn read_container(
        &self,
        c: &Arc<Container>,
        ino: u64,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
        later: &mut Deferred,
    ) -> Result<Filled, i32> {
        let len = c.len();
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
        match c.read_at_deferring(offset, buf, later) {
            Ok(got) => {
                buf.truncate(got);
                Ok(Filled::Buf)
            }
            Err(e) => {
                if e.kind == blosc_decode::ErrorKind::Changed {
                    // A file of it (a sparse frame's chunk file) was
                    // rewritten while the container's own stamp says
                    // unchanged: the next open opens it afresh.
                    self.forget_container(ino, c);
                }
                // One line per (file, chunk, reason), not per read.
                let key = format!("read:{:?}:{:?}:{}", e.path, e.chunk, e.reason);
                self.warn_once(
                    &key,
                    &format!("{e} (read of {n} bytes at offset {offset} fails with EIO; further failures like this are not logged)"),
                );
                Err(e.errno())
            }
        }
    }

    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, i32> {
        let mut v = Vec::new();
        if let Filled::Zeros(n) = self.read_into(fh, offset, size, &mut v)? {
            v = vec![0; n];
        }
        Ok(v)
    }

    /// `SEEK_DATA` / `SEEK_HOLE`: zero chunks are holes.
    pub fn lseek(&self, fh: u64, offset: i64, whence: i32) -> Result<i64, i32> {
        let h = self.handle(fh)?;
        let c = match &*h {
            Handle::Container(c, ..) => c,
            Handle::Plain { file: f, .. } => {
                // SAFETY: lseek on a descriptor `f` owns and keeps open for
                // the call; it touches no memory of ours.
                let r = unsafe { libc::lseek(std::os::fd::AsRawFd::as_raw_fd(f), offset, whence) };
                return if r < 0 { Err(io::last_errno()) } else { Ok(r) };
            }
        };
        let len = c.len() as i64;
        if offset < 0 || offset >= len {
            return Err(libc::ENXIO);
        }
        match whence {
            libc::SEEK_SET => Ok(offset),
            libc::SEEK_DATA | libc::SEEK_HOLE => {
                match c.seek_hole_or_data(offset as u64, whence == libc::SEEK_HOLE) {
                    Ok(Some(at)) => Ok(at as i64),
                    Ok(None) => Err(libc::ENXIO),
                    Err(e) => Err(e.errno()),
                }
            }
            _ => Err(libc::EINVAL),
        }
    }
}
