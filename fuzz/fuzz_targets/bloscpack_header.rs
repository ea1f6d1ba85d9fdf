//! Bloscpack header, metadata header and payload, NumPy metadata, checksums.
#![no_main]
use blosc_decode::format::bloscpack as bp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = bp::parse_header(data);
    if let Ok(m) = bp::parse_meta_header(data) {
        if m.size <= 1 << 20 {
            let _ = bp::decode_meta(&m, &data[32.min(data.len())..]);
        }
    }
    let _ = bp::numpy_meta(data);
    if let Some(&a) = data.first() {
        let _ = bp::verify_checksum(a % 10, data, data);
    }
});
