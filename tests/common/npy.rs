//! `.npy` files as bloscfs presents them against the bytes `numpy.save`
//! writes: the same header text and data, the header padded to a multiple
//! of 4096 bytes instead of 64 when the data is longer than 4096 bytes (so
//! that the data starts on a page), as long as np.load still reads it
//! untrusted (headers of 10,000 bytes at most). Written here from numpy's format
//! description, not from the daemon's code; shared by the tests of every
//! crate (included by path).
#![allow(dead_code)]

/// The bytes `numpy.save` writes for the array of `npy`, a `.npy` file as
/// bloscfs presents it: [`numpy_header`] then the data. Bytes that are not a
/// `.npy` file come back as they are.
pub fn as_numpy_saves(npy: &[u8]) -> Vec<u8> {
    match numpy_header(npy, npy.len() as u64) {
        Some((ours, mut theirs)) => {
            theirs.extend_from_slice(&npy[ours..]);
            theirs
        }
        None => npy.to_vec(),
    }
}

/// For a `.npy` file as bloscfs presents it, `len` bytes long, starting with
/// `head` (its header at least): the length of its header, and the header
/// `numpy.save` writes for the same array. bloscfs writes the same header
/// text but pads it to a multiple of 4096 bytes when the data is longer
/// than that, so that the data starts on a page (unless that takes the
/// header past the 10,000 bytes np.load reads untrusted); numpy pads to 64.
/// Checks that length on the way. `None` if `head` is not a `.npy` header.
pub fn numpy_header(head: &[u8], len: u64) -> Option<(usize, Vec<u8>)> {
    if !head.starts_with(b"\x93NUMPY") || head.len() < 12 {
        return None;
    }
    let (pre, hl) = length_field(head);
    let ours = pre + hl;
    let text = std::str::from_utf8(&head[pre..ours]).unwrap();
    let dict = &text[..=text.rfind('}').unwrap()];
    // numpy's spare spaces for the growth axis: the first dimension's (the
    // last in Fortran order) digits short of 21.
    let s = &dict[dict.find("'shape': (").unwrap() + 10..];
    let dims: Vec<&str> = s[..s.find(')').unwrap()]
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    let growth = match dict.contains("'fortran_order': True") {
        true => dims.last(),
        false => dims.first(),
    }
    .map_or(0, |d| 21usize.saturating_sub(d.len()));
    let end = pre + dict.len() + growth + 1;
    let total = end / 64 * 64 + 64;
    // bloscfs pads to a page when the data is longer than one, unless that
    // takes the header past the 10,000 bytes np.load reads untrusted.
    let page = end / 4096 * 4096 + 4096;
    let want = match len - ours as u64 > 4096 && page - pre <= 10_000 {
        true => page,
        false => total,
    };
    assert_eq!(ours, want, "header of {ours} bytes");
    let mut out = head[..pre].to_vec();
    set_length(&mut out, total - pre);
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    Some((ours, out))
}

/// The `.npy` file bloscfs presents for `numpy`, the bytes `numpy.save`
/// wrote: when the data is longer than 4096 bytes, numpy's header padded on
/// with spaces to the next multiple of 4096, unless that takes it past the
/// 10,000 bytes np.load reads untrusted. Other bytes come back as they are.
pub fn as_bloscfs_shows(numpy: &[u8]) -> Vec<u8> {
    if !numpy.starts_with(b"\x93NUMPY") || numpy.len() < 12 {
        return numpy.to_vec();
    }
    let (pre, hl) = length_field(numpy);
    let data = &numpy[pre + hl..];
    let total = (pre + hl).div_ceil(4096) * 4096;
    if data.len() <= 4096 || total - pre > 10_000 {
        return numpy.to_vec();
    }
    let mut out = numpy[..pre + hl - 1].to_vec();
    set_length(&mut out, total - pre);
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out.extend_from_slice(data);
    out
}

/// The bytes before a `.npy` header's text (magic, version, length field:
/// 10 for format 1.0, 12 after) and the length the field gives.
fn length_field(npy: &[u8]) -> (usize, usize) {
    match npy[6] {
        1 => (10, u16::from_le_bytes([npy[8], npy[9]]) as usize),
        _ => (
            12,
            u32::from_le_bytes([npy[8], npy[9], npy[10], npy[11]]) as usize,
        ),
    }
}

/// Write `len` into the length field of the `.npy` header starting `out`.
fn set_length(out: &mut [u8], len: usize) {
    match out[6] {
        1 => out[8..10].copy_from_slice(&(len as u16).to_le_bytes()),
        _ => out[8..12].copy_from_slice(&(len as u32).to_le_bytes()),
    }
}
