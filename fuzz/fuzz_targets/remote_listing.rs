//! What remote servers send that bloscfs parses: a manifest, an S3-style XML
//! listing, a Caterva2 listing, and the URLs users type. Each gives a value
//! or an error, never a panic; a manifest's paths become a tree whose every
//! path is found again.
#![no_main]
use bloscfs_remote::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse::caterva2_list(data);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse::xml_listing(text);
    let _ = bloscfs_remote::Location::parse(text);
    if let Ok(items) = parse::manifest(text) {
        let tree = parse::Tree::new(items.clone());
        for (path, _) in &items {
            assert!(tree.file(path).is_some(), "{path:?} lost from the tree");
        }
    }
});
