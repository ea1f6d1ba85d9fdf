//! A small, bounded msgpack reader for frame headers, trailers and
//! metalayers: borrowed values, checked lengths, limited nesting.

use crate::bytes;
use crate::ensure;
use crate::error::{Error, Result};

const MAX_DEPTH: usize = 16;
/// Arrays and maps longer than this are refused (frame headers hold a few dozen values).
const MAX_ITEMS: usize = 1 << 20;

/// A msgpack value, borrowing its bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum Val<'a> {
    /// `nil`.
    Nil,
    /// A boolean.
    Bool(bool),
    /// An integer (any msgpack width).
    Int(i128),
    /// A float (32 or 64 bits).
    Float(f64),
    /// A string's bytes (not checked to be UTF-8).
    Str(&'a [u8]),
    /// Binary bytes.
    Bin(&'a [u8]),
    /// An extension: its type and bytes.
    Ext(i8, &'a [u8]),
    /// An array.
    Array(Vec<Val<'a>>),
    /// A map, as its key-value pairs in order.
    Map(Vec<(Val<'a>, Val<'a>)>),
}

impl<'a> Val<'a> {
    /// The value as an integer, if it is one.
    pub fn as_int(&self) -> Option<i128> {
        match self {
            Val::Int(i) => Some(*i),
            _ => None,
        }
    }
    /// The value as text, if it is a UTF-8 string.
    pub fn as_str(&self) -> Option<&'a str> {
        match self {
            Val::Str(s) => std::str::from_utf8(s).ok(),
            _ => None,
        }
    }
    /// The value's items, if it is an array.
    pub fn as_array(&self) -> Option<&[Val<'a>]> {
        match self {
            Val::Array(v) => Some(v),
            _ => None,
        }
    }
}

/// A cursor over msgpack bytes.
pub struct Reader<'a>(bytes::Reader<'a>);

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self::at(buf, 0)
    }
    /// A reader at offset `pos` of `buf`.
    pub fn at(buf: &'a [u8], pos: usize) -> Self {
        Reader(bytes::Reader::at(buf, pos, "msgpack value"))
    }
    /// The offset of the next value.
    pub fn pos(&self) -> usize {
        self.0.pos()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        self.0.bytes(n)
    }
    fn u8(&mut self) -> Result<u8> {
        self.0.u8()
    }
    /// An `n`-byte big-endian unsigned integer (`n <= 8`).
    fn be(&mut self, n: usize) -> Result<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }

    /// Read one value.
    pub fn read(&mut self) -> Result<Val<'a>> {
        self.read_depth(0)
    }

    fn read_depth(&mut self, depth: usize) -> Result<Val<'a>> {
        ensure!(depth < MAX_DEPTH, corrupt, "msgpack nested too deeply");
        let t = self.u8()?;
        Ok(match t {
            0x00..=0x7f => Val::Int(t as i128),
            0xe0..=0xff => Val::Int((t as i8) as i128),
            0x80..=0x8f => self.map((t & 0x0f) as usize, depth)?,
            0x90..=0x9f => self.array((t & 0x0f) as usize, depth)?,
            0xa0..=0xbf => Val::Str(self.take((t & 0x1f) as usize)?),
            0xc0 => Val::Nil,
            0xc2 => Val::Bool(false),
            0xc3 => Val::Bool(true),
            0xc4 => {
                let n = self.be(1)? as usize;
                Val::Bin(self.take(n)?)
            }
            0xc5 => {
                let n = self.be(2)? as usize;
                Val::Bin(self.take(n)?)
            }
            0xc6 => {
                let n = self.be(4)? as usize;
                Val::Bin(self.take(n)?)
            }
            0xc7..=0xc9 => {
                let n = self.be(1 << (t - 0xc7))? as usize;
                let ty = self.u8()? as i8;
                Val::Ext(ty, self.take(n)?)
            }
            0xca => Val::Float(f32::from_bits(self.be(4)? as u32) as f64),
            0xcb => Val::Float(f64::from_bits(self.be(8)?)),
            0xcc => Val::Int(self.be(1)? as i128),
            0xcd => Val::Int(self.be(2)? as i128),
            0xce => Val::Int(self.be(4)? as i128),
            0xcf => Val::Int(self.be(8)? as i128),
            0xd0 => Val::Int(self.be(1)? as u8 as i8 as i128),
            0xd1 => Val::Int(self.be(2)? as u16 as i16 as i128),
            0xd2 => Val::Int(self.be(4)? as u32 as i32 as i128),
            0xd3 => Val::Int(self.be(8)? as i64 as i128),
            0xd4..=0xd8 => {
                let n = 1usize << (t - 0xd4);
                let ty = self.u8()? as i8;
                Val::Ext(ty, self.take(n)?)
            }
            0xd9 => {
                let n = self.be(1)? as usize;
                Val::Str(self.take(n)?)
            }
            0xda => {
                let n = self.be(2)? as usize;
                Val::Str(self.take(n)?)
            }
            0xdb => {
                let n = self.be(4)? as usize;
                Val::Str(self.take(n)?)
            }
            0xdc => {
                let n = self.be(2)? as usize;
                self.array(n, depth)?
            }
            0xdd => {
                let n = self.be(4)? as usize;
                self.array(n, depth)?
            }
            0xde => {
                let n = self.be(2)? as usize;
                self.map(n, depth)?
            }
            0xdf => {
                let n = self.be(4)? as usize;
                self.map(n, depth)?
            }
            0xc1 => return Err(Error::corrupt("msgpack: reserved type byte 0xc1")),
        })
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Val<'a>> {
        // Every element takes at least one byte: a count beyond the input is a lie.
        ensure!(
            n <= MAX_ITEMS && n <= self.0.remaining(),
            corrupt,
            "msgpack array of {n} items in {} bytes",
            self.0.remaining()
        );
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.read_depth(depth + 1)?);
        }
        Ok(Val::Array(v))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Val<'a>> {
        ensure!(
            n <= MAX_ITEMS && n.saturating_mul(2) <= self.0.remaining(),
            corrupt,
            "msgpack map of {n} entries in {} bytes",
            self.0.remaining()
        );
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.read_depth(depth + 1)?;
            let val = self.read_depth(depth + 1)?;
            v.push((k, val));
        }
        Ok(Val::Map(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_values() {
        let b = [0x93, 0x01, 0xa2, b'h', b'i', 0xd2, 0xff, 0xff, 0xff, 0xfe];
        let v = Reader::new(&b).read().unwrap();
        assert_eq!(
            v,
            Val::Array(vec![Val::Int(1), Val::Str(b"hi"), Val::Int(-2)])
        );
    }

    #[test]
    fn refuses_lying_lengths() {
        assert!(Reader::new(&[0xdd, 0xff, 0xff, 0xff, 0xff]).read().is_err());
        assert!(Reader::new(&[0xc6, 0x7f, 0, 0, 0, 1]).read().is_err());
        let deep = [0x91u8; 64];
        assert!(Reader::new(&deep).read().is_err());
    }
}
