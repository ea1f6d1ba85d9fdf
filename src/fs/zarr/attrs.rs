//! An array's attributes (v2 `.zattrs`, v3 the `attributes` of its
//! `zarr.json`, or the same from consolidated metadata) as `user.zarr.*`
//! extended attributes of its `.npy` ([`bloscfs_zarr::attrs`]). A document
//! not understood gives no attributes and one log line per version of it.

use super::super::source_tree::SourceTree;
use blosc_decode::io::Stamp;
use bloscfs_zarr::attrs::{self, Attrs, MAX_DOC_BYTES, ZATTRS};
use bloscfs_zarr::ZARR_JSON;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Each array directory looked at: its attributes (`None`: none, or not
/// understood), at the stamp of the file they came from.
pub(super) type Kept = HashMap<PathBuf, (Stamp, Option<Arc<Attrs>>)>;

/// The attributes of the array at `dir` from its own files, read once per
/// version of them.
pub(super) fn own_attrs(tree: &dyn SourceTree, kept: &mut Kept, dir: &Path) -> Option<Arc<Attrs>> {
    let files = [(ZATTRS, true), (ZARR_JSON, false)];
    super::npy::kept_doc(tree, kept, dir, files, MAX_DOC_BYTES, |text, v2| {
        let a = text
            .and_then(|t| attrs::parse(&t, v2))
            .map_err(|e| e.to_string());
        log_bad(dir, a.as_ref().map_err(String::as_str));
        a.ok().map(Arc::new)
    })
}

/// The log line of attributes not shown, or of keys left out.
pub(super) fn log_bad(dir: &Path, a: Result<&Attrs, &str>) {
    match a {
        Err(why) => log::warn!("{}: Zarr attributes not shown: {why}", dir.display()),
        Ok(a) if !a.left_out.is_empty() => log::warn!(
            "{}: Zarr attributes left out (name or value too long for an \
             extended attribute): {}",
            dir.display(),
            a.left_out.join(", ")
        ),
        Ok(_) => {}
    }
}
