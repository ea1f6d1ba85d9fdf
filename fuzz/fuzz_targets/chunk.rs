//! Chunk header, layout and whole-chunk decoding on arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(layout) = blosc_decode::format::chunk::ChunkLayout::parse(data) {
        // Decoding allocates nbytes; keep the fuzzer's memory bounded.
        if layout.header.nbytes <= 1 << 24 {
            let _ = blosc_decode::decode::decompress_chunk(data);
        }
    }
});
