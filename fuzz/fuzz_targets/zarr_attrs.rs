//! Zarr attributes as extended attributes: the input (after its first
//! byte) as a v2 `.zattrs` (odd first byte) or a v3 `zarr.json`, and, with
//! bit 1 of the first byte, as consolidated metadata with the attributes
//! of each array. Every name and value must fit Linux's xattr limits.
#![no_main]
use bloscfs_zarr::attrs::{self, Attrs, MAX_LIST_BYTES, MAX_NAME_BYTES, MAX_VALUE_BYTES};
use bloscfs_zarr::consolidated;
use libfuzzer_sys::fuzz_target;

fn check(a: &Attrs) {
    let mut listed = 0;
    for (n, v) in &a.pairs {
        assert!(n.starts_with(attrs::PREFIX) && n.len() <= MAX_NAME_BYTES);
        assert!(!n.contains('\0') && v.len() <= MAX_VALUE_BYTES);
        listed += n.len() + 1;
    }
    assert!(listed <= MAX_LIST_BYTES);
}

fuzz_target!(|data: &[u8]| {
    let Some((&flag, text)) = data.split_first() else {
        return;
    };
    let v2 = flag & 1 == 1;
    if flag & 2 != 0 {
        if let Ok(Some((nodes, all))) = consolidated::parse_with_attrs(text, v2) {
            for (rel, a) in &all {
                assert!(nodes.contains_key(rel));
                if let Ok(a) = a {
                    check(a);
                }
            }
        }
    } else if let Ok(a) = attrs::parse(text, v2) {
        check(&a);
    }
});
