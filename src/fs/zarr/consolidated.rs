//! Consolidated metadata ([`bloscfs_zarr::consolidated`]): when a group
//! above an array holds it, the array is presented from it alone: no
//! listing of its directory, no read of its own metadata file.

use super::super::source_tree::SourceTree;
use blosc_decode::io::Stamp;
use bloscfs_zarr::consolidated::{self, Node, Nodes, ZMETADATA};
use bloscfs_zarr::store::read_bounded;
use bloscfs_zarr::ZARR_JSON;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest consolidated metadata document read, in bytes.
const MAX_BYTES: u64 = 16 << 20;
/// Groups remembered, at most (the map is emptied past it).
const MAX_KEPT: usize = 1024;

/// Each group looked at: its consolidated nodes (`None`: it has none), at
/// the stamp of the file they came from.
pub(super) type Kept = HashMap<PathBuf, (Stamp, Option<Arc<Nodes>>)>;

/// The consolidated nodes of the group at `dir`, if it holds them: its
/// `.zmetadata`, else its `zarr.json`'s `consolidated_metadata`. Read
/// once per version of the file.
pub(super) fn nodes_at(tree: &dyn SourceTree, kept: &mut Kept, dir: &Path) -> Option<Arc<Nodes>> {
    let (file, v2) = [(ZMETADATA, true), (ZARR_JSON, false)]
        .into_iter()
        .find(|(f, _)| tree.stat(&dir.join(f)).is_ok_and(|m| m.is_file()))?;
    let path = dir.join(file);
    let md = tree.stat(&path).ok()?;
    if let Some((s, nodes)) = kept.get(dir) {
        if *s == md.stamp() {
            return nodes.clone();
        }
    }
    let parsed = tree
        .open_source(&path, &md)
        .and_then(|src| read_bounded(src.as_ref(), MAX_BYTES, file))
        .and_then(|text| consolidated::parse(&text, v2));
    let nodes = match parsed {
        Ok(nodes) => nodes,
        Err(e) => {
            log::warn!("{}: consolidated metadata not used: {e}", path.display());
            None
        }
    }
    .map(Arc::new);
    for (rel, node) in nodes.iter().flat_map(|n| n.iter()) {
        if let Node::Array(Err(why)) = node {
            super::npy::not_presented(&dir.join(rel), why);
        }
    }
    if kept.len() >= MAX_KEPT {
        kept.clear();
    }
    kept.insert(dir.to_path_buf(), (md.stamp(), nodes.clone()));
    nodes
}
