//! BloscLZ on arbitrary streams and output sizes: no panic, no overrun.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u16, &[u8])| {
    let (out_len, src) = input;
    let mut dst = vec![0u8; out_len as usize];
    if let Ok(n) = blosc_decode::codec::blosclz::decompress(src, &mut dst) {
        assert!(n <= dst.len());
    }
});
