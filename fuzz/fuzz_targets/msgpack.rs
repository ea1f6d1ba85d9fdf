//! The bounded msgpack reader.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = blosc_decode::format::msgpack::Reader::new(data);
    while r.pos() < data.len() {
        if r.read().is_err() {
            break;
        }
    }
});
