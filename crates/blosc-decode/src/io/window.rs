//! A byte range of another source, read as a source of its own: a member
//! kept in place in an archive (a `.b2z` store's frames).

use super::{check_range, Access, Source, Span};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `len` bytes of `inner` from `start` on, as a source of `len` bytes.
pub struct Window {
    inner: Arc<dyn Source>,
    start: u64,
    len: u64,
    /// The path messages name (the archive's path with the member's name).
    path: PathBuf,
}

impl Window {
    /// The window `start..start + len` of `inner`, which must lie inside it.
    pub fn new(inner: Arc<dyn Source>, start: u64, len: u64, path: PathBuf) -> Result<Window> {
        check_range(inner.len(), start, len).map_err(|_| {
            Error::truncated(format!(
                "{len} bytes at {start} run past the end of a {}-byte file",
                inner.len()
            ))
        })?;
        Ok(Window {
            inner,
            start,
            len,
            path,
        })
    }

    /// A hint of `len` bytes at `offset`, cut to the window, as a position
    /// and length in `inner`.
    fn hinted(&self, offset: u64, len: u64) -> Option<(u64, u64)> {
        let len = len.min(self.len.saturating_sub(offset));
        Some((self.outer(offset, len).ok()?, len))
    }

    /// Where `offset..offset + len` of the window lies in `inner`.
    fn outer(&self, offset: u64, len: u64) -> Result<u64> {
        check_range(self.len, offset, len)?;
        Ok(self.start + offset)
    }
}

impl Source for Window {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let at = self.outer(offset, buf.len() as u64)?;
        self.inner.read_exact_at(at, buf)
    }

    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn read_span<'a>(
        &self,
        offset: u64,
        len: usize,
        access: Access,
        scratch: &'a mut Vec<u8>,
    ) -> Result<(Span<'a>, bool)> {
        let at = self.outer(offset, len as u64)?;
        self.inner.read_span(at, len, access, scratch)
    }

    fn gone(&self) -> bool {
        self.inner.gone()
    }

    fn will_need(&self, offset: u64, len: u64) {
        if let Some((at, len)) = self.hinted(offset, len) {
            self.inner.will_need(at, len);
        }
    }

    fn will_read(&self, offset: u64, len: u64) {
        if let Some((at, len)) = self.hinted(offset, len) {
            self.inner.will_read(at, len);
        }
    }

    fn joins_reads(&self) -> bool {
        self.inner.joins_reads()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemSource;

    #[test]
    fn reads_inside_the_window_only() {
        let inner: Arc<dyn Source> = Arc::new(MemSource::new((0u8..100).collect::<Vec<_>>()));
        let w = Window::new(inner.clone(), 10, 20, "a/b".into()).unwrap();
        let mut b = [0u8; 5];
        w.read_exact_at(15, &mut b).unwrap();
        assert_eq!(b, [25, 26, 27, 28, 29]);
        assert!(w.read_exact_at(16, &mut b).is_err());
        let mut s = Vec::new();
        let (got, _) = w.read_span(0, 3, Access::Buffered, &mut s).unwrap();
        assert_eq!(got[..], [10, 11, 12]);
        assert!(w.read_span(18, 3, Access::Buffered, &mut s).is_err());
        assert!(Window::new(inner.clone(), 90, 11, "x".into()).is_err());
        assert!(Window::new(inner, u64::MAX, 2, "x".into()).is_err());
    }
}
