//! A `.b2z` store's zip directory: the end record, the central directory
//! and each member's local header, read from the archive's bytes.
#![no_main]
use blosc_decode::io::{MemSource, Source};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let src: Arc<dyn Source> = Arc::new(MemSource::new(data.to_vec()));
    if let Ok(members) = blosc_decode::open::store::members(src.as_ref()) {
        for m in members.iter().take(1000) {
            if let Ok(w) = blosc_decode::open::store::member_source(src.clone(), m, "f".as_ref()) {
                let mut b = [0u8; 16];
                let n = (w.len() as usize).min(16);
                let _ = w.read_exact_at(0, &mut b[..n]);
            }
        }
    }
});
