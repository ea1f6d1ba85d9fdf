//! Reads and seeks on open handles (each handle reads itself: `handle`).

use super::handle::ReadReq;
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
    ) -> Result<Filled, Error> {
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
    ) -> Result<Filled, Error> {
        let r = ReadReq {
            offset,
            size,
            paged,
        };
        self.handle(fh)?.read(self, r, buf, later)
    }

    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Error> {
        let mut v = Vec::new();
        match self.read_into(fh, offset, size, &mut v)? {
            Filled::Buf => {}
            Filled::Zeros(n) => v = vec![0; n],
            Filled::Shared(b, r) => {
                v = b[r].to_vec();
                self.recycle(b);
            }
        }
        Ok(v)
    }

    /// A span a [`Filled::Shared`] answer was sent from: its buffer is
    /// reused once nothing else holds it.
    pub fn recycle(&self, b: blosc_decode::cache::Block) {
        self.env.cache.recycle(b);
    }

    /// `SEEK_DATA` / `SEEK_HOLE`: zero chunks are holes.
    pub fn lseek(&self, fh: u64, offset: i64, whence: i32) -> Result<i64, Error> {
        self.handle(fh)?.lseek(offset, whence)
    }
}
