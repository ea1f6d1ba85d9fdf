//! Consolidated metadata ([`bloscfs_zarr::consolidated`]): when a group
//! above an array holds it, the array is presented from it alone: no
//! listing of its directory, no read of its own metadata file.

use super::super::source_tree::SourceTree;
use blosc_decode::io::Stamp;
use bloscfs_zarr::consolidated::{self, Node, NodeAttrs, Nodes, ZMETADATA};
use bloscfs_zarr::ZARR_JSON;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest consolidated metadata document read, in bytes.
const MAX_BYTES: u64 = 16 << 20;

/// A group's consolidated metadata: its nodes and their attributes.
pub(super) struct Group {
    pub(super) nodes: Nodes,
    pub(super) attrs: NodeAttrs,
}

/// Each group looked at: its consolidated metadata (`None`: it has none),
/// at the stamp of the file it came from.
pub(super) type Kept = HashMap<PathBuf, (Stamp, Option<Arc<Group>>)>;

/// The consolidated nodes of the group at `dir`, if it holds them: its
/// `.zmetadata`, else its `zarr.json`'s `consolidated_metadata`. Read
/// once per version of the file.
pub(super) fn nodes_at(tree: &dyn SourceTree, kept: &mut Kept, dir: &Path) -> Option<Arc<Group>> {
    let files = [(ZMETADATA, true), (ZARR_JSON, false)];
    super::npy::kept_doc(tree, kept, dir, files, MAX_BYTES, |text, v2| {
        let group = match text.and_then(|t| consolidated::parse_with_attrs(&t, v2)) {
            Ok(nodes) => nodes,
            Err(e) => {
                log::warn!("{}: consolidated metadata not used: {e}", dir.display());
                None
            }
        };
        let (nodes, attrs) = group?;
        for (rel, node) in &nodes {
            if let Node::Array(Err(why)) = node {
                super::npy::not_presented(&dir.join(rel), why);
            }
        }
        for (rel, a) in &attrs {
            super::attrs::log_bad(&dir.join(rel), a.as_deref().map_err(String::as_str));
        }
        Some(Arc::new(Group { nodes, attrs }))
    })
}
