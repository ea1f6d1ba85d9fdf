//! The ZFP codecs (zfp_acc, zfp_prec, zfp_rate) on arbitrary streams, block
//! shapes, metas and typesizes: an error or exactly the block's bytes, never
//! a panic, overrun, hang or unbounded allocation.
//!
//! Input: byte 0 the mode (mod 3), byte 1 the codec meta, byte 2 the
//! typesize (bit 0: 4 or 8 bytes; 2 when bits 1-2 are both set; bit 7: the
//! output one byte too long), byte 3 the number of dimensions (mod 5; 0 is
//! no block shape), then one byte per dimension (1 to 64), then the stream.
//! `scripts/fuzz/zfp_seeds.py` writes seeds from python-blosc2's streams.
#![no_main]
use blosc_decode::codec::{decompress, Params};
use blosc_decode::format::chunk::{Codec, ZfpMode};
use libfuzzer_sys::fuzz_target;

const MAX_OUT: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let mode = [ZfpMode::Accuracy, ZfpMode::Precision, ZfpMode::Rate][data[0] as usize % 3];
    let typesize: u8 = if data[2] & 6 == 6 {
        2
    } else if data[2] & 1 == 0 {
        4
    } else {
        8
    };
    let ndim = data[3] as usize % 5;
    if data.len() < 4 + ndim {
        return;
    }
    let shape: Vec<u64> = data[4..4 + ndim].iter().map(|&b| b as u64 % 64 + 1).collect();
    let out_len = shape.iter().product::<u64>() * typesize as u64 + u64::from(data[2] >> 7);
    if out_len > MAX_OUT {
        return;
    }
    let p = Params {
        dict: None,
        meta: data[1],
        typesize,
        block_shape: (ndim > 0).then_some(&shape[..]),
    };
    let mut dst = vec![0u8; out_len as usize];
    let _ = decompress(Codec::Zfp(mode), &data[4 + ndim..], &mut dst, &p);
});
