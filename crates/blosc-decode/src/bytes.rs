//! Checked reading of fixed-size integers from byte slices: the one place
//! the parsers turn bytes into numbers. A read past the end is an `Option`
//! (`le_at`, `be_at`) or a `Truncated` error naming what was being read
//! (`Reader`), never a panic.

use crate::error::{Error, Result};

/// An integer that can be read from its fixed-size byte representation.
pub(crate) trait Int: Sized + Copy {
    /// Size in bytes.
    const SIZE: usize;
    /// From the first `SIZE` bytes of `b`, little-endian; `None` if `b` is shorter.
    fn le(b: &[u8]) -> Option<Self>;
    /// From the first `SIZE` bytes of `b`, big-endian; `None` if `b` is shorter.
    fn be(b: &[u8]) -> Option<Self>;
    /// The consecutive little-endian values of `b` (a trailing partial one is left out).
    fn le_all(b: &[u8]) -> impl ExactSizeIterator<Item = Self> + '_;
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn le(b: &[u8]) -> Option<Self> {
                b.first_chunk().map(|a| <$t>::from_le_bytes(*a))
            }
            #[inline(always)]
            fn be(b: &[u8]) -> Option<Self> {
                b.first_chunk().map(|a| <$t>::from_be_bytes(*a))
            }
            #[inline(always)]
            fn le_all(b: &[u8]) -> impl ExactSizeIterator<Item = Self> + '_ {
                b.as_chunks().0.iter().map(|a| <$t>::from_le_bytes(*a))
            }
        }
    )*};
}
int!(u8, u16, u32, u64, i32, i64);

/// The little-endian `T` at byte `at` of `b`, if `b` holds all of it.
#[inline(always)]
pub(crate) fn le_at<T: Int>(b: &[u8], at: usize) -> Option<T> {
    T::le(b.get(at..)?)
}

/// The big-endian `T` at byte `at` of `b`, if `b` holds all of it.
#[inline(always)]
pub(crate) fn be_at<T: Int>(b: &[u8], at: usize) -> Option<T> {
    T::be(b.get(at..)?)
}

/// The consecutive little-endian `T`s of `b` (a trailing partial one is left out).
pub(crate) fn le_all<T: Int>(b: &[u8]) -> impl ExactSizeIterator<Item = T> + '_ {
    T::le_all(b)
}

/// A cursor over a byte slice. Each read advances it, or fails with a
/// `Truncated` error naming what was being read and where, and leaves the
/// cursor in place.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`, which holds a `what` (for errors).
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }

    /// A reader at byte `pos` of `buf` (which may be past its end: the
    /// first read then fails).
    pub(crate) fn at(buf: &'a [u8], pos: usize, what: &'static str) -> Self {
        Reader { buf, pos, what }
    }

    /// The offset of the next read in the slice.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// How many bytes are left from the cursor on.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let s = self
            .pos
            .checked_add(n)
            .and_then(|end| self.buf.get(self.pos..end))
            .ok_or_else(|| self.past_end(n))?;
        self.pos += n;
        Ok(s)
    }

    /// Step over `n` bytes.
    pub(crate) fn skip(&mut self, n: usize) -> Result<()> {
        self.bytes(n).map(drop)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        self.le()
    }

    /// The next `T`, little-endian.
    pub(crate) fn le<T: Int>(&mut self) -> Result<T> {
        let v = T::le(self.rest()).ok_or_else(|| self.past_end(T::SIZE))?;
        self.pos += T::SIZE;
        Ok(v)
    }

    /// The next `T`, big-endian.
    pub(crate) fn be<T: Int>(&mut self) -> Result<T> {
        let v = T::be(self.rest()).ok_or_else(|| self.past_end(T::SIZE))?;
        self.pos += T::SIZE;
        Ok(v)
    }

    /// The bytes from the cursor on (none when it is past the end).
    fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    fn past_end(&self, n: usize) -> Error {
        Error::truncated(format!(
            "{}: {n} bytes at offset {} run past its end at {}",
            self.what,
            self.pos,
            self.buf.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_byte_orders_and_stops_at_the_end() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(le_at::<u32>(&b, 0), Some(0x0403_0201));
        assert_eq!(be_at::<u32>(&b, 5), Some(0x0607_0809));
        assert_eq!(le_at::<u32>(&b, 6), None);
        assert_eq!(le_at::<u16>(&b, usize::MAX), None);
        assert_eq!(
            le_all::<u16>(&b).collect::<Vec<_>>(),
            [0x201, 0x403, 0x605, 0x807]
        );
        let mut r = Reader::new(&b, "test header");
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.le::<i32>().unwrap(), 0x0504_0302);
        r.skip(1).unwrap();
        let e = r.le::<u64>().unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::Truncated);
        assert_eq!(
            e.reason,
            "test header: 8 bytes at offset 6 run past its end at 9"
        );
        assert_eq!(r.pos(), 6, "a failed read leaves the cursor in place");
        assert_eq!(r.be::<u16>().unwrap(), 0x0708);
        assert!(Reader::at(&b, 10, "x").skip(0).is_err());
        assert!(Reader::at(&b, 9, "x").skip(0).is_ok());
        assert!(Reader::at(&b, 1, "x").skip(usize::MAX).is_err());
    }
}
