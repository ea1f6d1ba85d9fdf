//! Every decode filter on arbitrary buffers and typesizes.
#![no_main]
use blosc_decode::filter::{bitshuffle, bytedelta, delta, shuffle};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u8, u8, &[u8])| {
    let (ts, version, src) = input;
    let ts = ts as usize;
    let mut dst = vec![0u8; src.len()];
    if ts > 0 {
        shuffle::unshuffle(ts, src, &mut dst);
        let _ = bitshuffle::bitunshuffle(ts, src, &mut dst, version % 6);
        delta::decode_ref(ts, &mut dst);
        let r = dst.clone();
        delta::decode_against(ts, &r[..r.len() / 2], &mut dst);
    }
    let _ = bytedelta::decode(ts, src, &mut dst);
});
