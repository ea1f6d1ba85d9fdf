//! A python-blosc2 CTable (`format::ctable` says what its files hold) read
//! as one structured `.npy` of its valid rows: what `numpy.asarray(table)`
//! gives, then `numpy.save` writes.
//!
//! Opening checks the parts against each other: `_meta.b2f`'s vlmeta says
//! `kind: ctable` and holds a schema of fixed-size columns; each column is
//! a 1-D b2nd array whose dtype fits its kind, as long as the mask
//! `_valid_rows.b2nd` (1-D, bool); `n_rows`, when recorded, is the count
//! of rows the mask holds true. The mask is then read once, a segment of
//! [`SEGMENT`] rows at a time, and only a count of valid rows per segment
//! is kept. A read finds the segment of its first row by those counts,
//! scans the mask from there for the physical rows it needs, and gathers
//! each column's values of those rows through the column's [`Container`]
//! (so decoded blocks go through the shared cache).

use crate::container::Container;
use crate::dtype::{Dtype, Field, MAX_ITEMSIZE};
use crate::ensure;
use crate::error::{Error, Result};
use crate::format::{b2nd, ctable};

/// Rows of the mask per counted segment.
pub const SEGMENT: u64 = 1 << 16;
/// Bytes of records gathered at once, at most (at least one record).
const BATCH_BYTES: u64 = 4 << 20;
/// The key of the table's description, relative to its root.
pub const META_KEY: &str = "_meta.b2f";
/// The key of the mask of valid rows.
pub const MASK_KEY: &str = "_valid_rows.b2nd";

/// One column: its array and where its value sits in a record.
struct Col {
    name: String,
    /// Its NumPy type string (`'<i8'`).
    code: String,
    array: Container,
    /// The array's `.npy` header length (its values follow, in row order).
    skip: u64,
    /// The value's size and offset in a record.
    size: u64,
    at: u64,
}

/// A CTable's valid rows as a `.npy` file.
pub struct CTable {
    cols: Vec<Col>,
    mask: Container,
    mask_skip: u64,
    capacity: u64,
    /// Valid rows before each segment (one more entry than segments).
    before: Vec<u64>,
    header: Vec<u8>,
    record: u64,
    descr: String,
}

/// A 1-D b2nd array's length, dtype text and `.npy` header length.
fn array_1d(c: &Container, what: &str) -> Result<(u64, Dtype, u64)> {
    let meta = c
        .info()
        .metalayers
        .iter()
        .find(|(n, _)| n == "b2nd")
        .map(|(_, m)| b2nd::parse(m))
        .transpose()?
        .ok_or_else(|| Error::corrupt(format!("{what}: not a b2nd array")))?;
    ensure!(
        meta.shape.len() == 1,
        corrupt,
        "{what}: {} dimensions, not 1",
        meta.shape.len()
    );
    let dtype = Dtype::parse(&meta.dtype).map_err(|e| Error::corrupt(format!("{what}: {e}")))?;
    let skip = c.view().header_len();
    ensure!(c.view().is_npy(), corrupt, "{what}: not presented as .npy");
    let want = meta.shape[0].checked_mul(dtype.itemsize());
    ensure!(
        want.and_then(|n| n.checked_add(skip)) == Some(c.len()),
        corrupt,
        "{what}: {} bytes for {} values of {} bytes",
        c.len().saturating_sub(skip),
        meta.shape[0],
        dtype.itemsize()
    );
    Ok((meta.shape[0], dtype, skip))
}

impl CTable {
    /// Open the table whose parts `open` gives by key (`_meta.b2f`,
    /// `_valid_rows.b2nd`, `_cols/NAME.b2nd`); `None` if `_meta.b2f` is not
    /// a CTable's.
    pub fn open(open: &dyn Fn(&str) -> Result<Container>) -> Result<Option<CTable>> {
        let meta = open(META_KEY)?;
        if !ctable::is_ctable(&meta.info().vlmetalayers) {
            return Ok(None);
        }
        let schema = ctable::schema_of(&meta.info().vlmetalayers).map_err(Error::corrupt)?;
        let mask = open(MASK_KEY)?;
        let (capacity, mdt, mask_skip) = array_1d(&mask, MASK_KEY)?;
        ensure!(
            matches!(&mdt, Dtype::Scalar { code, size: 1 } if code == "|b1"),
            corrupt,
            "{MASK_KEY}: not a bool array"
        );
        let mut cols = Vec::with_capacity(schema.columns.len());
        let mut fields = Vec::with_capacity(schema.columns.len());
        let mut record = 0u64;
        for c in &schema.columns {
            let key = c.key();
            let array = open(&key)?;
            let (len, dtype, skip) = array_1d(&array, &key)?;
            let Dtype::Scalar { code, size } = &dtype else {
                return Err(Error::corrupt(format!("{key}: not one value per row")));
            };
            ensure!(
                c.fits(code, *size),
                corrupt,
                "{key}: dtype {code} does not fit the schema's kind {}",
                c.kind
            );
            ensure!(
                len == capacity,
                corrupt,
                "{key}: {len} rows where {MASK_KEY} has {capacity}"
            );
            let (code, size) = (code.clone(), *size);
            fields.push(Field {
                name: c.name.clone(),
                title: None,
                dtype,
                offset: record,
            });
            cols.push(Col {
                name: c.name.clone(),
                code,
                array,
                skip,
                size,
                at: record,
            });
            record += size;
            ensure!(record <= MAX_ITEMSIZE, corrupt, "records of {record} bytes");
        }
        let descr = Dtype::Struct {
            fields,
            itemsize: record,
        }
        .descr()
        .map_err(Error::corrupt)?;
        let mut t = CTable {
            cols,
            mask,
            mask_skip,
            capacity,
            before: Vec::new(),
            header: Vec::new(),
            record,
            descr,
        };
        t.count()?;
        if let Some(n) = schema.n_rows {
            ensure!(
                n == t.rows(),
                corrupt,
                "schema says {n} rows, {MASK_KEY} holds {}",
                t.rows()
            );
        }
        let bytes = t
            .rows()
            .checked_mul(record)
            .ok_or_else(|| Error::corrupt("table larger than 2^64 bytes"))?;
        t.header = crate::npy::npy_header(&t.descr, false, &[t.rows()], bytes);
        Ok(Some(t))
    }

    /// Count the valid rows of each segment of the mask.
    fn count(&mut self) -> Result<()> {
        let segments = self.capacity.div_ceil(SEGMENT);
        let mut before = Vec::with_capacity(segments as usize + 1);
        let mut buf = Vec::new();
        let mut n = 0u64;
        before.push(0);
        for s in 0..segments {
            let m = self.mask_segment(s, &mut buf)?;
            n += m.iter().filter(|&&b| b != 0).count() as u64;
            before.push(n);
        }
        self.before = before;
        Ok(())
    }

    /// The mask bytes of segment `s`, read into `buf`.
    fn mask_segment<'b>(&self, s: u64, buf: &'b mut Vec<u8>) -> Result<&'b [u8]> {
        let start = s * SEGMENT;
        let n = SEGMENT.min(self.capacity - start) as usize;
        buf.resize(n, 0);
        read_exact(&self.mask, self.mask_skip + start, buf, MASK_KEY)?;
        Ok(buf)
    }

    /// Valid rows: records in the `.npy`.
    pub fn rows(&self) -> u64 {
        self.before.last().copied().unwrap_or(0)
    }

    /// Rows of the columns, valid or not.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes of one record.
    pub fn record_len(&self) -> u64 {
        self.record
    }

    /// The records' dtype as `numpy.save` writes it.
    pub fn descr(&self) -> &str {
        &self.descr
    }

    /// The fields in order: name and NumPy type string.
    pub fn fields(&self) -> Vec<(&str, &str)> {
        self.cols.iter().map(|c| (&*c.name, &*c.code)).collect()
    }

    /// The `.npy` file's length.
    pub fn len(&self) -> u64 {
        self.header.len() as u64 + self.rows() * self.record
    }

    /// Is the `.npy` file empty?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fill `buf` from `offset` of the `.npy` file; returns the bytes
    /// written (fewer only at the end of the file).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let len = self.len();
        if offset >= len || buf.is_empty() {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(len - offset) as usize;
        let h = self.header.len() as u64;
        let mut done = 0usize;
        if offset < h {
            let n = ((h - offset) as usize).min(want);
            buf[..n].copy_from_slice(&self.header[offset as usize..offset as usize + n]);
            done = n;
        }
        let per = (BATCH_BYTES / self.record).max(1);
        let mut recs = Vec::new();
        while done < want {
            let pos = offset + done as u64 - h;
            let row = pos / self.record;
            let last = (offset + want as u64 - h).div_ceil(self.record);
            let n = (last - row).min(per);
            recs.resize((n * self.record) as usize, 0);
            self.fill(row, n, &mut recs)?;
            let from = (pos - row * self.record) as usize;
            let k = (recs.len() - from).min(want - done);
            buf[done..done + k].copy_from_slice(&recs[from..from + k]);
            done += k;
        }
        Ok(done)
    }

    /// Write records `row..row + n` into `out`.
    fn fill(&self, row: u64, n: u64, out: &mut [u8]) -> Result<()> {
        let runs = self.runs(row, n)?;
        let rec = self.record as usize;
        let mut tmp = Vec::new();
        for c in &self.cols {
            let size = c.size as usize;
            let mut r = 0usize;
            for &(phys, count) in &runs {
                tmp.resize(count as usize * size, 0);
                read_exact(&c.array, c.skip + phys * c.size, &mut tmp, &c.name)?;
                for (j, v) in tmp.chunks_exact(size).enumerate() {
                    let at = (r + j) * rec + c.at as usize;
                    out[at..at + size].copy_from_slice(v);
                }
                r += count as usize;
            }
        }
        Ok(())
    }

    /// The physical rows of valid rows `row..row + n`, as runs (first
    /// physical row, count).
    fn runs(&self, row: u64, n: u64) -> Result<Vec<(u64, u64)>> {
        let mut s = self.before.partition_point(|&b| b <= row) as u64 - 1;
        let mut skip = row - self.before[s as usize];
        let mut left = n;
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut buf = Vec::new();
        while left > 0 {
            ensure!(
                s + 1 < self.before.len() as u64,
                corrupt,
                "{MASK_KEY}: fewer valid rows than counted"
            );
            if self.before[s as usize + 1] == self.before[s as usize] {
                s += 1;
                continue;
            }
            let m = self.mask_segment(s, &mut buf)?;
            for (i, _) in m.iter().enumerate().filter(|(_, &b)| b != 0) {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                let phys = s * SEGMENT + i as u64;
                match runs.last_mut() {
                    Some((p, c)) if *p + *c == phys => *c += 1,
                    _ => runs.push((phys, 1)),
                }
                left -= 1;
                if left == 0 {
                    break;
                }
            }
            s += 1;
        }
        Ok(runs)
    }
}

/// Fill `buf` from `offset` of `c`, all of it.
fn read_exact(c: &Container, offset: u64, buf: &mut [u8], what: &str) -> Result<()> {
    let got = c.read_at(offset, buf)?;
    ensure!(
        got == buf.len(),
        truncated,
        "{what}: {got} bytes of {} at offset {offset}",
        buf.len()
    );
    Ok(())
}

impl CTable {
    /// What `bloscfs info` says of the table (lines, each ended).
    pub fn describe(&self) -> String {
        let fields: Vec<String> = self
            .cols
            .iter()
            .map(|c| format!("{} {}", c.name, c.code))
            .collect();
        format!(
            "python-blosc2 CTable: its valid rows as one structured .npy\n\
             rows:          {} of a capacity of {} ({} not valid: deleted or never written)\n\
             fields:        {}\n\
             record:        {} bytes\n\
             .npy header:   {} bytes\n\
             size:          {} bytes\n",
            self.rows(),
            self.capacity,
            self.capacity - self.rows(),
            fields.join(", "),
            self.record,
            self.header.len(),
            self.len()
        )
    }
}
