//! Zarr metadata (v2 `.zarray` when the first byte is odd, else v3
//! `zarr.json`), then the rest of the input after `\n--chunk--\n` decoded
//! as one chunk of the array it describes. With bit 1 of the first byte,
//! the metadata is read as consolidated metadata instead (`.zmetadata` or
//! a group's `zarr.json`).
#![no_main]
use bloscfs_zarr::{codec, consolidated, ArrayMeta};
use libfuzzer_sys::fuzz_target;

const SEP: &[u8] = b"\n--chunk--\n";

fuzz_target!(|data: &[u8]| {
    let Some((&flag, rest)) = data.split_first() else {
        return;
    };
    let (meta, chunk) = match rest.windows(SEP.len()).position(|w| w == SEP) {
        Some(i) => (&rest[..i], &rest[i + SEP.len()..]),
        None => (rest, &[][..]),
    };
    if flag & 2 != 0 {
        for node in consolidated::parse(meta, flag & 1 == 1)
            .ok()
            .flatten()
            .into_iter()
            .flatten()
        {
            if let (_, consolidated::Node::Array(Ok(m))) = node {
                assert_eq!(m.fill.len() as u64, m.dtype.size);
            }
        }
        return;
    }
    let Ok(m) = ArrayMeta::parse(meta, flag & 1 == 1) else {
        return;
    };
    assert_eq!(m.fill.len() as u64, m.dtype.size);
    if m.chunk_bytes() <= 1 << 20 {
        if let Ok(v) = codec::decode_chunk(&m, chunk.to_vec()) {
            assert_eq!(v.len() as u64, m.chunk_bytes());
        }
    }
});
