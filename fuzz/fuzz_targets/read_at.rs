//! Any bytes, detected and opened as a container, read whole and at an
//! arbitrary window: must never panic, hang or allocate without bound.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::Arc;

fuzz_target!(|input: (u64, u16, Vec<u8>)| {
    let (off, len, data) = input;
    let src = Arc::new(bloscfs::io::MemSource::new(data));
    let env = bloscfs::Env::new(1 << 20);
    if let Ok(Some(c)) = bloscfs::detect::open_source(src, Path::new("fuzz-input"), &env) {
        let total = c.len();
        let mut whole = vec![0u8; total.min(1 << 20) as usize];
        let _ = c.read_at(0, &mut whole);
        let mut window = vec![0u8; len as usize];
        let _ = c.read_at(off % total.saturating_add(1), &mut window);
    }
});
