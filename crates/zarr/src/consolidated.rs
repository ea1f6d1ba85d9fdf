//! Consolidated metadata: a v2 group's `.zmetadata` and a v3 group's
//! `zarr.json` with `consolidated_metadata`, which describe every node
//! below the group.

use crate::{ArrayMeta, Error, Result};
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// A v2 store's consolidated metadata file.
pub const ZMETADATA: &str = ".zmetadata";

/// What consolidated metadata says of a node.
#[derive(Debug, Clone)]
pub enum Node {
    /// An array (`Err`: one not presented, with the reason).
    Array(std::result::Result<Arc<ArrayMeta>, String>),
    /// A group, or anything but an array.
    Other,
}

/// The nodes a group's consolidated metadata describes, by their path
/// relative to the group.
pub type Nodes = HashMap<PathBuf, Node>;

/// The nodes of a `.zmetadata` (`v2`) or of a group's `zarr.json`
/// (`Ok(None)`: a `zarr.json` without consolidated metadata).
pub fn parse(text: &[u8], v2: bool) -> Result<Option<Nodes>> {
    let doc: Value = serde_json::from_slice(text)
        .map_err(|e| Error::corrupt(format!("metadata is not JSON: {e}")))?;
    Ok(if v2 { v2_nodes(&doc) } else { v3_nodes(&doc) })
}

/// `.zmetadata`: `{"metadata": {"a/.zarray": {...}, "a/.zattrs": ...}}`.
fn v2_nodes(doc: &Value) -> Option<Nodes> {
    let all = doc.get("metadata")?.as_object()?;
    let mut out = Nodes::new();
    for (key, v) in all {
        if let Some(rel) = key.strip_suffix("/.zarray") {
            out.insert(PathBuf::from(rel), array(v, true));
        } else if let Some(rel) = key.strip_suffix("/.zgroup") {
            out.insert(PathBuf::from(rel), Node::Other);
        }
    }
    Some(out)
}

/// A v3 group's `consolidated_metadata.metadata`: each node's `zarr.json`
/// by its path.
fn v3_nodes(doc: &Value) -> Option<Nodes> {
    let all = doc
        .get("consolidated_metadata")?
        .get("metadata")?
        .as_object()?;
    let nodes = all.iter().map(|(rel, v)| {
        let node = match v.get("node_type").and_then(Value::as_str) {
            Some("array") => array(v, false),
            _ => Node::Other,
        };
        (PathBuf::from(rel), node)
    });
    Some(nodes.collect())
}

fn array(doc: &Value, v2: bool) -> Node {
    Node::Array(match ArrayMeta::from_json(doc, v2) {
        Ok(Some(m)) => Ok(Arc::new(m)),
        Ok(None) => Err("a group, not an array".into()),
        Err(e) => Err(e.to_string()),
    })
}
