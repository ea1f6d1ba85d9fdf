//! Presenting N-dimensional arrays as NumPy `.npy` files.
//!
//! A b2nd array is stored chunk by chunk (chunks in C order over the chunk
//! grid), each chunk padded to `extchunkshape` (the chunk shape rounded up to
//! whole blocks) and laid out block by block (C order over the block grid),
//! each block in C order. `NdLayout` maps the logical C-order array back to
//! that raw content, run by run, so a read touches only the blocks holding
//! the elements it asks for.
//!
//! ```
//! use blosc_decode::npy::{npy_header, NdLayout};
//!
//! let head = npy_header("'<f8'", false, &[3, 4], 96);
//! assert!(head.starts_with(b"\x93NUMPY\x01\x00"));
//! assert_eq!(head.len(), 128);
//! // The data of an array over a page starts on a page.
//! assert_eq!(npy_header("'<f8'", false, &[1024, 4], 32768).len(), 4096);
//! // A 3x4 array in 2x2 chunks of 1x2 blocks, 8-byte items.
//! let l = NdLayout::new(&[3, 4], &[2, 2], &[1, 2], 8)?;
//! assert_eq!((l.nelems(), l.chunk_bytes(), l.block_bytes()), (12, 32, 16));
//! # Ok::<(), blosc_decode::Error>(())
//! ```

use crate::ensure;
use crate::error::{Error, Result};

/// Geometry of a b2nd array, checked on construction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NdLayout {
    /// The array's shape.
    pub shape: Vec<u64>,
    /// The shape of one chunk.
    pub chunkshape: Vec<u64>,
    /// The shape of one block.
    pub blockshape: Vec<u64>,
    /// Bytes of one item.
    pub itemsize: u64,
    /// chunkshape rounded up to whole blocks.
    ext: Vec<u64>,
    /// Number of chunks along each dimension.
    grid: Vec<u64>,
    /// Blocks per chunk along each dimension.
    bgrid: Vec<u64>,
    chunk_bytes: u64,
    block_bytes: u64,
    /// Size of the padded content (`grid` chunks of `chunk_bytes`).
    raw_len: u64,
}

/// Arrays bigger than this (elements x itemsize) are refused as corrupt.
pub const MAX_ARRAY_BYTES: u64 = 1 << 56;

impl NdLayout {
    /// The layout of an array of `shape` in chunks of `chunkshape` and blocks of `blockshape`, items of `itemsize` bytes; every product checked (a zero or oversized dimension is an error).
    pub fn new(
        shape: &[u64],
        chunkshape: &[u64],
        blockshape: &[u64],
        itemsize: u64,
    ) -> Result<Self> {
        let nd = shape.len();
        ensure!(
            chunkshape.len() == nd && blockshape.len() == nd,
            corrupt,
            "b2nd: shape, chunk shape and block shape have different ranks"
        );
        ensure!(
            nd <= 16,
            corrupt,
            "b2nd: {nd} dimensions (at most 16 are supported)"
        );
        ensure!(
            itemsize > 0 && itemsize <= 1 << 30,
            corrupt,
            "b2nd: bad itemsize {itemsize}"
        );
        let mut ext = Vec::with_capacity(nd);
        let mut grid = Vec::with_capacity(nd);
        let mut bgrid = Vec::with_capacity(nd);
        let mut total = itemsize;
        let mut chunk_bytes = itemsize;
        let mut block_bytes = itemsize;
        // A zero-length dimension may have zero chunk and block extents
        // (python-blosc2 writes `(0,)` for all three); as in C-Blosc2, a
        // zero block needs a zero chunk, and a zero chunk a zero length.
        let ceil_div = |a: u64, b: u64| if b == 0 { 0 } else { a.div_ceil(b) };
        for k in 0..nd {
            let (s, c, b) = (shape[k], chunkshape[k], blockshape[k]);
            ensure!(
                b <= c && (b > 0 || c == 0) && (c > 0 || s == 0),
                corrupt,
                "b2nd: dimension {k}: chunk {c} / block {b} shape is not usable"
            );
            let e = ceil_div(c, b) * b;
            ext.push(e);
            grid.push(ceil_div(s, c));
            bgrid.push(ceil_div(e, b));
            let over = || Error::corrupt("b2nd: array size overflows");
            total = total.checked_mul(s).ok_or_else(over)?;
            chunk_bytes = chunk_bytes.checked_mul(e).ok_or_else(over)?;
            block_bytes = block_bytes.checked_mul(b).ok_or_else(over)?;
        }
        ensure!(
            total <= MAX_ARRAY_BYTES,
            corrupt,
            "b2nd: array of {total} bytes is too large"
        );
        ensure!(
            chunk_bytes <= i32::MAX as u64,
            corrupt,
            "b2nd: padded chunk of {chunk_bytes} bytes exceeds the 2 GiB chunk limit"
        );
        // The padded content: chunks in the grid times the padded chunk
        // size. Bounded like the array (a small array in huge padded chunks
        // can still claim more than any file holds).
        let raw_len = grid
            .iter()
            .try_fold(chunk_bytes, |acc, &g| acc.checked_mul(g))
            .filter(|&r| r <= MAX_ARRAY_BYTES)
            .ok_or_else(|| Error::corrupt("b2nd: padded array size overflows"))?;
        Ok(NdLayout {
            shape: shape.to_vec(),
            chunkshape: chunkshape.to_vec(),
            blockshape: blockshape.to_vec(),
            itemsize,
            ext,
            grid,
            bgrid,
            chunk_bytes,
            block_bytes,
            raw_len,
        })
    }

    /// Number of items.
    pub fn nelems(&self) -> u64 {
        self.shape.iter().product()
    }
    /// Logical (C-order, unpadded) size in bytes.
    pub fn data_len(&self) -> u64 {
        self.nelems() * self.itemsize
    }
    /// Size of the raw padded content the frame must hold.
    pub fn raw_len(&self) -> u64 {
        self.raw_len
    }
    /// Bytes of one chunk, padded to whole blocks.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_bytes
    }
    /// Bytes of one block.
    pub fn block_bytes(&self) -> u64 {
        self.block_bytes
    }

    /// Split the logical element range `[e0, e0+n)` into runs contiguous in
    /// the raw content: calls `f(raw_offset_bytes, nelems)` for each, in order.
    #[allow(clippy::needless_range_loop)] // walks several per-dimension arrays in step
    pub fn for_each_run(
        &self,
        e0: u64,
        n: u64,
        mut f: impl FnMut(u64, u64) -> Result<()>,
    ) -> Result<()> {
        let nd = self.shape.len();
        if n == 0 {
            return Ok(());
        }
        if nd == 0 {
            return f(0, 1);
        }
        // Unravel e0 into a multi-index.
        let mut idx = vec![0u64; nd];
        let mut rem = e0;
        for k in (0..nd).rev() {
            idx[k] = rem % self.shape[k];
            rem /= self.shape[k];
        }
        let last = nd - 1;
        let mut left = n;
        while left > 0 {
            // Raw offset of element `idx`.
            let mut chunk_lin = 0u64;
            let mut block_lin = 0u64;
            let mut within = 0u64;
            for k in 0..nd {
                let c = idx[k] / self.chunkshape[k];
                let j = idx[k] % self.chunkshape[k];
                let b = j / self.blockshape[k];
                let w = j % self.blockshape[k];
                chunk_lin = chunk_lin * self.grid[k] + c;
                block_lin = block_lin * self.bgrid[k] + b;
                within = within * self.blockshape[k] + w;
            }
            let raw = chunk_lin * self.chunk_bytes
                + block_lin * self.block_bytes
                + within * self.itemsize;
            // Run along the last dimension: up to the block edge, the chunk
            // edge and the array edge.
            let i = idx[last];
            let j = i % self.chunkshape[last];
            let w = j % self.blockshape[last];
            let mut run = (self.blockshape[last] - w)
                .min(self.chunkshape[last] - j)
                .min(self.shape[last] - i)
                .min(left);
            // Whole rows of a block extend the run when the block spans the
            // full trailing extent (common for 1-D and row-major blocks).
            if run == self.shape[last] - i
                && nd > 1
                && i == 0
                && self.blockshape[last] == self.shape[last]
                && self.chunkshape[last] == self.shape[last]
            {
                // Rows are adjacent inside a block when the block covers whole
                // rows; extend over following rows in the same block.
                let k = last - 1;
                let rows_left_block =
                    self.blockshape[k] - (idx[k] % self.chunkshape[k]) % self.blockshape[k];
                let rows_left_chunk = self.chunkshape[k] - idx[k] % self.chunkshape[k];
                let rows_left_arr = self.shape[k] - idx[k];
                let rows = rows_left_block.min(rows_left_chunk).min(rows_left_arr);
                let elems = (rows * self.shape[last]).min(left);
                run = elems;
            }
            f(raw, run)?;
            left -= run;
            // Advance idx by `run` elements.
            let mut carry = run;
            for k in (0..nd).rev() {
                let v = idx[k] + carry;
                idx[k] = v % self.shape[k];
                carry = v / self.shape[k];
                if carry == 0 {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// Where data longer than one page starts in a `.npy` file: at a multiple
/// of the page size. The kernel reads a file through the page cache
/// in pages; with the data on a page boundary, a page of data is a run of
/// whole elements that, for the power-of-two chunk and block shapes writers
/// choose, lies in one chunk and one block, instead of straddling two.
pub const DATA_ALIGN: usize = 4096;

/// The longest header (after its length field) `np.load` reads without
/// being told to trust the file (`max_header_size`, numpy 1.24 and later).
/// Padding to a page never takes a header past it: a header that would
/// pass it keeps numpy's 64-byte padding.
pub const NUMPY_MAX_HEADER: usize = 10_000;

/// The `.npy` header `numpy.save` writes, for `descr` given as Python text
/// (`Dtype::descr`) and `data_len` bytes of data: format 1.0 (2.0 when the
/// header needs more than 65535 bytes, 3.0 when it is not Latin-1), spare
/// spaces for the growth axis, padded with spaces and ended by a newline.
/// `numpy.save` pads to a multiple of 64 bytes; so does this for data of one
/// page or less, and to a multiple of [`DATA_ALIGN`] for more (`np.load`
/// reads any padding the format allows) unless that would take the header
/// past [`NUMPY_MAX_HEADER`].
pub fn npy_header(descr: &str, fortran_order: bool, shape: &[u64], data_len: u64) -> Vec<u8> {
    let align = if data_len > DATA_ALIGN as u64 {
        DATA_ALIGN
    } else {
        64
    };
    let shape_s = match shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut dict = format!(
        "{{'descr': {descr}, 'fortran_order': {}, 'shape': {shape_s}, }}",
        if fortran_order { "True" } else { "False" }
    );
    if let Some(&g) = if fortran_order {
        shape.last()
    } else {
        shape.first()
    } {
        // numpy's GROWTH_AXIS_MAX_DIGITS
        dict.push_str(&" ".repeat(21usize.saturating_sub(g.to_string().len())));
    }
    // Formats 1.0 and 2.0 hold Latin-1 text; 3.0 UTF-8 (field names
    // outside Latin-1).
    let latin1: Option<Vec<u8>> = dict
        .chars()
        .map(|c| u8::try_from(u32::from(c)).ok())
        .collect();
    let versions: &[(u8, usize)] = if latin1.is_some() {
        &[(1, 2), (2, 4)]
    } else {
        &[(3, 4)]
    };
    let text = latin1.unwrap_or_else(|| dict.clone().into_bytes());
    for &(major, len_bytes) in versions {
        let pre = 6 + 2 + len_bytes;
        let hlen = text.len() + 1;
        let mut pad = align - (pre + hlen) % align;
        if hlen + pad > NUMPY_MAX_HEADER {
            pad = 64 - (pre + hlen) % 64;
        }
        let total = pre + hlen + pad;
        if major == 1 && hlen + pad > u16::MAX as usize {
            continue;
        }
        let mut h = Vec::with_capacity(total);
        h.extend_from_slice(b"\x93NUMPY");
        h.push(major);
        h.push(0);
        if major == 1 {
            h.extend_from_slice(&((hlen + pad) as u16).to_le_bytes());
        } else {
            h.extend_from_slice(&((hlen + pad) as u32).to_le_bytes());
        }
        h.extend_from_slice(&text);
        h.resize(total - 1, b' ');
        h.push(b'\n');
        return h;
    }
    unreachable!("a 4-byte header length always fits")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_aligned() {
        let h = npy_header("'<f8'", false, &[3, 4], 96);
        assert_eq!(h.len() % 64, 0);
        assert!(h.starts_with(b"\x93NUMPY\x01\x00"));
        assert_eq!(*h.last().unwrap(), b'\n');
    }

    #[test]
    fn data_over_a_page_starts_on_a_page() {
        for (data, want) in [(4096, 128), (4097, 4096)] {
            assert_eq!(npy_header("'<u1'", false, &[data], data).len(), want);
        }
        let fields = |n: usize| {
            let names: Vec<String> = (0..n).map(|i| format!("('f{i}', '<f8')")).collect();
            format!("[{}]", names.join(", "))
        };
        // A header text longer than a page takes the next page.
        let h = npy_header(&fields(300), false, &[10], 24000);
        assert_eq!(h.len(), 2 * DATA_ALIGN);
        assert!(h.starts_with(b"\x93NUMPY\x01\x00"));
        // One that would pass np.load's limit on the next page keeps
        // numpy's padding (a text of about 9,000 bytes).
        let text = fields(520);
        assert!(text.len() > 2 * DATA_ALIGN && text.len() < NUMPY_MAX_HEADER - 100);
        let h = npy_header(&text, false, &[10], 49600);
        assert_eq!(h.len() % 64, 0);
        assert!(h.len() - 10 <= NUMPY_MAX_HEADER && h.len() < 3 * DATA_ALIGN - 2000);
    }

    #[test]
    fn empty_arrays() {
        for (shape, cs, bs) in [
            (&[0u64][..], &[0u64][..], &[0u64][..]),
            (&[3, 0, 4], &[3, 0, 4], &[3, 0, 4]),
            (&[3, 0, 4], &[1, 1, 1], &[1, 1, 1]),
        ] {
            let l = NdLayout::new(shape, cs, bs, 4).unwrap();
            assert_eq!((l.nelems(), l.data_len(), l.raw_len()), (0, 0, 0));
        }
        // C-Blosc2 refuses these too.
        assert!(NdLayout::new(&[5], &[0], &[0], 4).is_err());
        assert!(NdLayout::new(&[0], &[2], &[0], 4).is_err());
        assert!(NdLayout::new(&[0], &[2], &[3], 4).is_err());
    }

    /// Brute force: the element at each multi-index against `for_each_run`.
    #[test]
    fn runs_match_brute_force() {
        let cases: &[(&[u64], &[u64], &[u64])] = &[
            (&[7, 11, 5], &[4, 6, 3], &[2, 3, 2]),
            (&[10], &[4], &[3]),
            (&[5, 8], &[5, 8], &[2, 8]),
            (&[3, 3, 3, 3], &[2, 2, 2, 2], &[1, 2, 1, 2]),
        ];
        for &(shape, cs, bs) in cases {
            let l = NdLayout::new(shape, cs, bs, 1).unwrap();
            let n = l.nelems();
            // expected raw offset of each element
            let expect: Vec<u64> = (0..n)
                .map(|e| {
                    let mut out = 0;
                    l.for_each_run(e, 1, |r, _| {
                        out = r;
                        Ok(())
                    })
                    .unwrap();
                    out
                })
                .collect();
            for start in 0..n {
                for len in [1, 2, 5, 13, n] {
                    let len = len.min(n - start);
                    let mut got = Vec::new();
                    l.for_each_run(start, len, |r, k| {
                        for t in 0..k {
                            got.push(r + t);
                        }
                        Ok(())
                    })
                    .unwrap();
                    assert_eq!(&got[..], &expect[start as usize..(start + len) as usize]);
                }
            }
        }
    }
}
