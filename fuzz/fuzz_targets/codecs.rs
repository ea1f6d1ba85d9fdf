//! Every stream codec (blosclz, lz4, lz4 with a dictionary, snappy, zlib,
//! zstd, zstd with a dictionary) on arbitrary streams and bounded output
//! sizes: an error or exactly the asked-for bytes, never a panic, overrun,
//! hang or unbounded allocation.
//!
//! Input: byte 0 picks the codec (and whether a dictionary is used), bytes
//! 1..4 the output size (little-endian, capped at 1 MiB), bytes 4..6 the
//! dictionary length (dictionary cases only), then the dictionary, then the
//! stream.
#![no_main]
use blosc_decode::format::chunk::Codec;
use libfuzzer_sys::fuzz_target;

const MAX_OUT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (codec, with_dict) = match data[0] % 7 {
        0 => (Codec::BloscLz, false),
        1 => (Codec::Lz4, false),
        2 => (Codec::Lz4, true),
        3 => (Codec::Snappy, false),
        4 => (Codec::Zlib, false),
        5 => (Codec::Zstd, false),
        _ => (Codec::Zstd, true),
    };
    let out_len = (u32::from_le_bytes([data[1], data[2], data[3], 0]) as usize).min(MAX_OUT);
    let mut rest = &data[4..];
    let dict = if with_dict {
        if rest.len() < 2 {
            return;
        }
        let n = (u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
        let d = &rest[2..2 + n];
        rest = &rest[2 + n..];
        Some(d)
    } else {
        None
    };
    let mut dst = vec![0u8; out_len];
    let params = blosc_decode::codec::Params {
        dict,
        ..Default::default()
    };
    let _ = blosc_decode::codec::decompress(codec, rest, &mut dst, &params);
});
