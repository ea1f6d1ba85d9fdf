//! A Zarr v3 shard file read through its index: the first byte picks the
//! layout (bit 0: index at the start, bit 1: big-endian, bit 2: crc32c),
//! the second how many inner chunks (1 to 64), the rest is the shard file.
//! Every entry the index gives must lie inside the file, outside the index.
#![no_main]
use blosc_decode::io::MemSource;
use bloscfs_zarr::meta::ShardMeta;
use bloscfs_zarr::shard::Index;
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let [flags, n, file @ ..] = data else {
        return;
    };
    let m = ShardMeta {
        shape: vec![u64::from(n % 64) + 1],
        per: vec![u64::from(n % 64) + 1],
        index_at_start: flags & 1 != 0,
        index_big: flags & 2 != 0,
        index_crc: flags & 4 != 0,
        inner: None,
    };
    let len = file.len() as u64;
    let Ok(ix) = Index::read(Arc::new(MemSource::new(file.to_vec())), &m) else {
        return;
    };
    let (lo, hi) = match m.index_at_start {
        true => (m.index_bytes(), len),
        false => (0, len - m.index_bytes()),
    };
    for i in 0..=m.inner_count() {
        if let Ok(Some((off, nb))) = ix.entry(i) {
            assert!(i < m.inner_count() && off >= lo && off + nb <= hi);
        }
    }
});
