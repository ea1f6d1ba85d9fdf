//! Frame header, trailer and offsets parsing on arbitrary bytes.
#![no_main]
use blosc_decode::format::frame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = frame::prefix(data);
    let _ = frame::parse_header(data);
    let _ = frame::trailer_len(data);
    let _ = frame::parse_trailer(data);
    if let Ok(values) = frame::offset_values(data) {
        values.for_each(|v| {
            let _ = frame::decode_offset(v);
        });
    }
});
