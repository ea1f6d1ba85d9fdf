//! The `__pack_tensor__` vlmetalayer of frames saved by python-blosc2's
//! `save_tensor`, and the dtype text it gives.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = blosc_decode::format::tensor::parse(data) {
        let _ = blosc_decode::dtype::Dtype::parse(&t.numpy.descr).map(|d| d.descr());
    }
});
