//! Remote listings: URLs, manifests, S3-style XML listings and Caterva2
//! `/api/list` answers, as the remote crate parses them from a server.
#![no_main]

use bloscfs_remote::parse::{
    caterva2_list, content_range, http_date, manifest, s3_error, xml_listing, Tree,
};
use bloscfs_remote::Location;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match which % 4 {
        0 => {
            if let Ok((items, _)) = manifest(&text) {
                let tree = Tree::new(items.iter().cloned());
                for (path, _) in &items {
                    if let Some((dir, _)) = path.rsplit_once('/') {
                        assert!(tree.level(dir).is_some());
                    }
                }
            }
        }
        1 => {
            let _ = xml_listing(&text);
            let _ = s3_error(rest);
            if let Some((a, b, total)) = content_range(&text) {
                assert!(a <= b && b < total);
            }
            let _ = http_date(&text);
        }
        2 => {
            if let Ok((names, _)) = caterva2_list(rest) {
                let tree = Tree::new(names.into_iter().map(|n| (n, None)));
                let _ = tree.level("");
            }
        }
        _ => {
            if let Some(Ok(loc)) = Location::parse(&text) {
                // Display gives back a URL that parses to the same place.
                let again = Location::parse(&loc.to_string());
                assert!(matches!(again, Some(Ok(ref l)) if *l == loc), "{loc:?}");
            }
        }
    }
});
