//! How the raw content is presented: as it is, or as a `.npy` file (a
//! header, then the array in C order, remapped from b2nd chunks and blocks).

use super::Container;
use crate::deferred::Deferred;
use crate::ensure;
use crate::error::{Error, Result};
use crate::npy::NdLayout;

/// How the raw uncompressed content is presented.
#[derive(Debug, Clone)]
pub enum View {
    /// As it is.
    Raw,
    /// As a `.npy` file: `header` then the array data, either the raw content
    /// itself (`nd: None`, e.g. Bloscpack arrays) or remapped from b2nd chunks
    /// and blocks into C order.
    Npy {
        /// The `.npy` header, padding included.
        header: Vec<u8>,
        /// The b2nd chunk and block shapes to remap from (`None`: the raw
        /// content is the array in the order stored).
        nd: Option<Box<NdLayout>>,
        /// The dtype as `numpy.save` writes it.
        descr: String,
    },
}

impl View {
    /// Presented as a `.npy` file (with its header): named `NAME.npy`.
    /// An array whose dtype a header cannot carry has no header and keeps
    /// its source name.
    pub fn is_npy(&self) -> bool {
        matches!(self, View::Npy { header, .. } if !header.is_empty())
    }

    /// Presented length, given the raw content's length.
    pub fn len(&self, raw_len: u64) -> u64 {
        match self {
            View::Raw => raw_len,
            View::Npy {
                header,
                nd: Some(nd),
                ..
            } => header.len() as u64 + nd.data_len(),
            View::Npy {
                header, nd: None, ..
            } => header.len() as u64 + raw_len,
        }
    }

    /// The length of the `.npy` header before the content (0 for the raw view).
    pub fn header_len(&self) -> u64 {
        match self {
            View::Raw => 0,
            View::Npy { header, .. } => header.len() as u64,
        }
    }
}

impl Container {
    /// Present this container through `view` (checked against the content size).
    pub fn with_view(mut self, view: View) -> Result<Container> {
        if let View::Npy { nd: Some(nd), .. } = &view {
            ensure!(
                nd.raw_len() <= self.raw_len(),
                corrupt,
                "b2nd array needs {} bytes of chunk data but the frame holds {}",
                nd.raw_len(),
                self.raw_len()
            );
        }
        self.view = view;
        Ok(self)
    }

    /// Fill `buf` from offset `offset` of the presented file.
    pub(super) fn read_view_at(
        &self,
        offset: u64,
        buf: &mut [u8],
        later: &mut Deferred,
    ) -> Result<usize> {
        let (header, nd) = match &self.view {
            View::Raw => return self.read_raw_at(offset, buf, later),
            View::Npy { header, nd, .. } => (header, nd),
        };
        let len = self.len();
        if offset >= len || buf.is_empty() {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(len - offset) as usize;
        let buf = &mut buf[..want];
        let hl = header.len() as u64;
        let mut done = 0usize;
        if offset < hl {
            let n = ((hl - offset) as usize).min(want);
            buf[..n].copy_from_slice(&header[offset as usize..offset as usize + n]);
            done = n;
        }
        if done == want {
            return Ok(want);
        }
        let data_off = offset + done as u64 - hl;
        let out = &mut buf[done..];
        match nd {
            None => {
                let got = self.read_raw_at(data_off, out, later)?;
                ensure!(
                    got == out.len(),
                    truncated,
                    "array data shorter than its header says"
                );
            }
            Some(nd) => self.read_array(nd, data_off, out, later)?,
        }
        Ok(want)
    }

    /// Call `f(raw offset, length)` for the runs of raw content that the
    /// presented bytes `from..from+len` (past a `.npy` header) come from,
    /// until it returns false. True if it never did (and the array layout
    /// could be walked).
    pub(super) fn raw_runs(
        &self,
        from: u64,
        len: u64,
        mut f: impl FnMut(u64, u64) -> bool,
    ) -> bool {
        let (hl, nd) = match &self.view {
            View::Raw => return f(from, len),
            View::Npy { header, nd, .. } => (header.len() as u64, nd),
        };
        let end = from.saturating_add(len).saturating_sub(hl);
        let from = from.max(hl) - hl;
        if end <= from {
            return true;
        }
        match nd {
            None => f(from, end - from),
            Some(nd) => {
                let is = nd.itemsize;
                let e0 = from / is;
                let e1 = end.div_ceil(is).min(nd.data_len() / is);
                e1 <= e0
                    || nd
                        .for_each_run(e0, e1 - e0, |raw, k| match f(raw, k * is) {
                            true => Ok(()),
                            // Ends the walk (not reported).
                            false => Err(Error::corrupt("walk stopped")),
                        })
                        .is_ok()
            }
        }
    }
}
