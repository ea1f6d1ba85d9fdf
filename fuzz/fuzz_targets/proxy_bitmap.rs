//! The vlmetalayers of a python-blosc2 proxy cache that say which chunks
//! (or blocks) it fetched: `proxy-fetched`, `proxy-fetched-blocks` and
//! `proxy-fetched-bpc` (msgpack values), for a chunk count.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let nchunks = u64::from_le_bytes(data[1..9].try_into().unwrap());
    let rest = &data[9..];
    let cut = rest.len() / 2;
    let (a, b) = (rest[..cut].to_vec(), rest[cut..].to_vec());
    let vlmeta: Vec<(String, Vec<u8>)> = match data[0] % 3 {
        0 => vec![("proxy-fetched".into(), a)],
        1 => vec![
            ("proxy-fetched-blocks".into(), a),
            ("proxy-fetched-bpc".into(), b),
        ],
        _ => vec![("proxy-dirty".into(), a), ("proxy-fetched".into(), b)],
    };
    if let Ok(f) = blosc_decode::format::proxy::fetched(&vlmeta, nchunks) {
        for n in [0, 1, nchunks / 2, nchunks.saturating_sub(1), nchunks, u64::MAX] {
            let _ = f.chunk(n.min(1 << 20));
            let _ = f.block(n, f.bpc().saturating_sub(1));
        }
    }
});
