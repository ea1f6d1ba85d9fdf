//! The packed super-chunk header.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = blosc_decode::format::packed::parse_header(data);
    let _ = blosc_decode::format::packed::looks_packed(data, data.len() as u64);
});
