//! The zip archives python-blosc2 writes its stores in (`.b2z`): the
//! central directory, and where a member's data starts. Only what reading a
//! member in place needs: names, compression method, sizes and the offset of
//! the local header (ZIP64 sizes and offsets included). Members are never
//! decompressed here: a `.b2z` keeps its members stored (method 0).

use crate::bytes::Reader;
use crate::error::{Error, Result};

/// The end-of-central-directory record's fixed part.
pub const EOCD_LEN: usize = 22;
/// How far from the end the EOCD record may start (its comment is at most
/// 65,535 bytes): the bytes [`find_eocd`] wants at the archive's end.
pub const TAIL_LEN: usize = EOCD_LEN + u16::MAX as usize;
/// The ZIP64 end-of-central-directory locator, just before the EOCD.
const LOCATOR_LEN: usize = 20;
/// The ZIP64 end-of-central-directory record's fixed part.
pub const EOCD64_LEN: usize = 56;
/// A local file header's fixed part.
pub const LOCAL_LEN: usize = 30;
/// A central directory larger than this is refused (a store of a million
/// members takes about 60 MiB).
pub const MAX_CDIR: u64 = 256 << 20;

const EOCD_SIG: u32 = 0x0605_4b50;
const LOCATOR_SIG: u32 = 0x0706_4b50;
const EOCD64_SIG: u32 = 0x0606_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const LOCAL_SIG: u32 = 0x0403_4b50;

/// One member as the central directory describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its name as stored (`/`-separated; a directory's ends in `/`).
    pub name: Vec<u8>,
    /// Compression method: 0 is stored.
    pub method: u16,
    /// General-purpose flags (bit 0: encrypted).
    pub flags: u16,
    /// Bytes of data in the archive.
    pub compressed: u64,
    /// Bytes once decompressed.
    pub size: u64,
    /// Where its local header starts.
    pub local_offset: u64,
}

impl Member {
    /// Is it kept as its own bytes (stored and not encrypted), readable in
    /// place?
    pub fn in_place(&self) -> bool {
        self.method == 0 && self.flags & 1 == 0 && self.compressed == self.size
    }
}

/// Where the central directory is, from the archive's last bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CentralDir {
    /// Where the central directory starts.
    pub offset: u64,
    /// Bytes of the central directory.
    pub len: u64,
    /// Number of members it lists.
    pub entries: u64,
    /// A ZIP64 archive: the record at this offset holds the real values
    /// (read it with [`parse_eocd64`]).
    pub zip64_record: Option<u64>,
}

/// Find the EOCD record in `tail`, the last bytes of an archive of
/// `file_len` bytes (at most [`TAIL_LEN`]), searching back from the end.
pub fn find_eocd(tail: &[u8], file_len: u64) -> Result<CentralDir> {
    let tail_start = file_len
        .checked_sub(tail.len() as u64)
        .ok_or_else(|| Error::corrupt("zip: tail longer than the archive"))?;
    let last = tail
        .len()
        .checked_sub(EOCD_LEN)
        .ok_or_else(|| Error::truncated("zip: too short for an end-of-central-directory"))?;
    for at in (0..=last).rev() {
        if tail[at..at + 4] != EOCD_SIG.to_le_bytes() {
            continue;
        }
        let mut r = Reader::at(tail, at + 4, "zip end record");
        let (disk, cd_disk) = (r.le::<u16>()?, r.le::<u16>()?);
        r.skip(2)?;
        let entries = r.le::<u16>()? as u64;
        let len = r.le::<u32>()? as u64;
        let offset = r.le::<u32>()? as u64;
        let comment = r.le::<u16>()? as usize;
        // The comment must end the archive: a signature inside a comment
        // or a member's data is not the record.
        if at + EOCD_LEN + comment != tail.len() {
            continue;
        }
        if (disk != 0 && disk != u16::MAX) || (cd_disk != 0 && cd_disk != u16::MAX) {
            return Err(Error::unsupported("zip: a multi-disk archive"));
        }
        let zip64_record = zip64_locator(tail, at, tail_start)?;
        return Ok(CentralDir {
            offset,
            len,
            entries,
            zip64_record,
        });
    }
    Err(Error::corrupt("zip: no end-of-central-directory record"))
}

/// The ZIP64 record's offset, if a locator precedes the EOCD at `at`.
fn zip64_locator(tail: &[u8], at: usize, tail_start: u64) -> Result<Option<u64>> {
    let Some(loc) = at.checked_sub(LOCATOR_LEN) else {
        return Ok(None);
    };
    let mut r = Reader::at(tail, loc, "zip64 locator");
    if r.le::<u32>()? != LOCATOR_SIG {
        return Ok(None);
    }
    r.skip(4)?;
    let record = r.le::<u64>()?;
    let max = tail_start + loc as u64;
    if record > max.saturating_sub(EOCD64_LEN as u64) {
        return Err(Error::corrupt(format!(
            "zip64 end record at {record} is not before its locator at {max}"
        )));
    }
    Ok(Some(record))
}

/// The central directory's place from a ZIP64 end record.
pub fn parse_eocd64(rec: &[u8]) -> Result<CentralDir> {
    let mut r = Reader::new(rec, "zip64 end record");
    if r.le::<u32>()? != EOCD64_SIG {
        return Err(Error::corrupt("zip64 end record: bad signature"));
    }
    r.skip(20)?;
    let _on_disk = r.le::<u64>()?;
    let entries = r.le::<u64>()?;
    let len = r.le::<u64>()?;
    let offset = r.le::<u64>()?;
    Ok(CentralDir {
        offset,
        len,
        entries,
        zip64_record: None,
    })
}

/// The members of central directory `cd` (its `entries` records), each
/// checked to lie before `data_end` (where the central directory starts).
pub fn parse_central(cd: &[u8], entries: u64, data_end: u64) -> Result<Vec<Member>> {
    // Every record takes at least 46 bytes: a lying count allocates nothing.
    let most = cd.len() as u64 / 46;
    if entries > most {
        return Err(Error::corrupt(format!(
            "zip: {entries} members declared in a central directory of {} bytes",
            cd.len()
        )));
    }
    let mut r = Reader::new(cd, "zip central directory");
    let mut out = Vec::with_capacity(entries as usize);
    for _ in 0..entries {
        let m = central_record(&mut r)?;
        m.local_offset
            .checked_add(LOCAL_LEN as u64)
            .and_then(|e| e.checked_add(m.compressed))
            .filter(|&e| e <= data_end)
            .ok_or_else(|| {
                Error::corrupt(format!(
                    "zip: member {} does not fit before the central directory",
                    String::from_utf8_lossy(&m.name)
                ))
            })?;
        out.push(m);
    }
    Ok(out)
}

/// One central directory record, at `r`'s cursor.
fn central_record(r: &mut Reader) -> Result<Member> {
    if r.le::<u32>()? != CENTRAL_SIG {
        return Err(Error::corrupt(format!(
            "zip: no central directory record at offset {}",
            r.pos() - 4
        )));
    }
    r.skip(4)?;
    let flags = r.le::<u16>()?;
    let method = r.le::<u16>()?;
    r.skip(8)?;
    let mut compressed = r.le::<u32>()? as u64;
    let mut size = r.le::<u32>()? as u64;
    let name_len = r.le::<u16>()? as usize;
    let extra_len = r.le::<u16>()? as usize;
    let comment_len = r.le::<u16>()? as usize;
    r.skip(8)?;
    let mut local_offset = r.le::<u32>()? as u64;
    let name = r.bytes(name_len)?.to_vec();
    let extra = r.bytes(extra_len)?;
    r.skip(comment_len)?;
    // ZIP64: the fields at 0xFFFFFFFF are in the extra field, in this order.
    let mut z = zip64_extra(extra)?.map(|b| Reader::new(b, "zip64 extra field"));
    for field in [&mut size, &mut compressed, &mut local_offset] {
        if *field == u32::MAX as u64 {
            let z = z
                .as_mut()
                .ok_or_else(|| Error::corrupt("zip: ZIP64 value without its extra field"))?;
            *field = z.le::<u64>()?;
        }
    }
    Ok(Member {
        name,
        method,
        flags,
        compressed,
        size,
        local_offset,
    })
}

/// The ZIP64 extended information of an extra field, if it has one.
fn zip64_extra(extra: &[u8]) -> Result<Option<&[u8]>> {
    let mut r = Reader::new(extra, "zip extra field");
    while r.remaining() >= 4 {
        let id = r.le::<u16>()?;
        let len = r.le::<u16>()? as usize;
        let body = r.bytes(len)?;
        if id == 1 {
            return Ok(Some(body));
        }
    }
    Ok(None)
}

/// Where the data of the member whose local header is `local` (its first
/// [`LOCAL_LEN`] bytes) starts, relative to that header.
pub fn data_start(local: &[u8]) -> Result<u64> {
    let mut r = Reader::new(local, "zip local header");
    if r.le::<u32>()? != LOCAL_SIG {
        return Err(Error::corrupt(
            "zip: no local header where the member starts",
        ));
    }
    r.skip(22)?;
    let name = r.le::<u16>()? as u64;
    let extra = r.le::<u16>()? as u64;
    Ok(LOCAL_LEN as u64 + name + extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written by python-blosc2 4.14 (`DictStore(...b2z)`): four stored
    /// members.
    const STORE: &[u8] = include_bytes!("../../../../tests/fixtures/stores/b2-4.14.1/dict.b2z");

    fn members(zip: &[u8]) -> Result<Vec<Member>> {
        let tail = &zip[zip.len().saturating_sub(TAIL_LEN)..];
        let cd = find_eocd(tail, zip.len() as u64)?;
        assert_eq!(cd.zip64_record, None);
        let start = cd.offset as usize;
        parse_central(&zip[start..start + cd.len as usize], cd.entries, cd.offset)
    }

    #[test]
    fn python_store_members() {
        let m = members(STORE).unwrap();
        let mut names: Vec<_> = m.iter().map(|m| String::from_utf8_lossy(&m.name)).collect();
        names.sort();
        assert_eq!(names, ["a.b2nd", "embed.b2e", "grp/b.b2nd", "s.b2f"]);
        for m in &m {
            assert!(m.in_place(), "{m:?}");
            let at = m.local_offset as usize;
            let data = at + data_start(&STORE[at..at + LOCAL_LEN]).unwrap() as usize;
            // Every member is a frame: msgpack fixarray, then the magic.
            assert_eq!(&STORE[data + 2..data + 9], b"b2frame", "{m:?}");
        }
    }

    #[test]
    fn damaged_archives_fail_cleanly() {
        for cut in [0, 10, 21, STORE.len() - 1] {
            assert!(members(&STORE[..cut]).is_err(), "cut at {cut}");
        }
        let mut lying = STORE.to_vec();
        let n = lying.len();
        // The entry count of the EOCD record (at 10 from its start).
        lying[n - EOCD_LEN + 10..n - EOCD_LEN + 12].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(members(&lying).is_err());
    }
}
