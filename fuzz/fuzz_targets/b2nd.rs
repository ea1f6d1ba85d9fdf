//! The b2nd metalayer and the .npy view built from it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = blosc_decode::format::b2nd::parse(data) {
        if let Ok(d) = blosc_decode::dtype::Dtype::parse(&m.dtype) {
            let _ = d.descr();
        }
        if let Ok(l) = blosc_decode::npy::NdLayout::new(&m.shape, &m.chunkshape, &m.blockshape, 8) {
            let n = l.nelems().min(10_000);
            let _ = l.for_each_run(0, n, |_, _| Ok(()));
        }
    }
});
