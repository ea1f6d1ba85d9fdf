//! python-blosc2's zipped stores (`.b2z`: DictStore, TreeStore, CTable):
//! the members of the archive, and a member kept stored read in place as a
//! source of its own ([`Window`]), never extracted.

use crate::error::{Error, Result};
use crate::format::zip::{self, Member};
use crate::io::{read_vec, Source, Window};
use std::path::Path;
use std::sync::Arc;

/// The members of the zip archive `src`, as its central directory lists
/// them.
pub fn members(src: &dyn Source) -> Result<Vec<Member>> {
    let len = src.len();
    let tail_len = len.min(zip::TAIL_LEN as u64);
    let tail = read_vec(src, len - tail_len, tail_len)?;
    let mut cd = zip::find_eocd(&tail, len)?;
    if let Some(at) = cd.zip64_record {
        cd = zip::parse_eocd64(&read_vec(src, at, zip::EOCD64_LEN as u64)?)?;
    }
    if cd.len > zip::MAX_CDIR {
        return Err(Error::unsupported(format!(
            "zip: a central directory of {} bytes (at most {})",
            cd.len,
            zip::MAX_CDIR
        )));
    }
    let dir = read_vec(src, cd.offset, cd.len)?;
    zip::parse_central(&dir, cd.entries, cd.offset)
}

/// The data of member `m` of the archive `src` at `path`, read in place.
/// A member that is not kept as its own bytes (deflated, encrypted) fails:
/// a `.b2z` is read where it lies.
pub fn member_source(src: Arc<dyn Source>, m: &Member, path: &Path) -> Result<Window> {
    let name = String::from_utf8_lossy(&m.name);
    let at = path.join(&*name);
    if !m.in_place() {
        return Err(Error::unsupported(format!(
            "member {name} is not stored as its own bytes (compression method {}, flags {:#x}): a .b2z is read in place, unzip it to read this member",
            m.method, m.flags
        ))
        .in_file(path));
    }
    let local = read_vec(src.as_ref(), m.local_offset, zip::LOCAL_LEN as u64)
        .map_err(|e| e.in_file(&at))?;
    let start = zip::data_start(&local)
        .and_then(|d| {
            m.local_offset
                .checked_add(d)
                .ok_or_else(|| Error::corrupt("zip: member offset overflows"))
        })
        .map_err(|e| e.in_file(&at))?;
    Window::new(src, start, m.compressed, at.clone()).map_err(|e| e.in_file(&at))
}
