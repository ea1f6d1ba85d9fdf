//! Consolidated metadata: a v2 group's `.zmetadata` and a v3 group's
//! `zarr.json` with `consolidated_metadata`, which describe every node
//! below the group.

use crate::attrs::{self, Attrs};
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

/// The attributes of the arrays a group's consolidated metadata describes
/// (`Err`: not understood, with the reason), by their relative path.
pub type NodeAttrs = HashMap<PathBuf, std::result::Result<Arc<Attrs>, String>>;

/// The nodes of a `.zmetadata` (`v2`) or of a group's `zarr.json`
/// (`Ok(None)`: a `zarr.json` without consolidated metadata).
pub fn parse(text: &[u8], v2: bool) -> Result<Option<Nodes>> {
    Ok(parse_with_attrs(text, v2)?.map(|(nodes, _)| nodes))
}

/// [`parse`], with the attributes of each array.
pub fn parse_with_attrs(text: &[u8], v2: bool) -> Result<Option<(Nodes, NodeAttrs)>> {
    let doc: Value = serde_json::from_slice(text)
        .map_err(|e| Error::corrupt(format!("metadata is not JSON: {e}")))?;
    let Some(nodes) = (if v2 { v2_nodes(&doc) } else { v3_nodes(&doc) }) else {
        return Ok(None);
    };
    let attrs = node_attrs(&doc, &nodes, v2);
    Ok(Some((nodes, attrs)))
}

/// The attributes of each array of `nodes`: v2's `PATH/.zattrs` entries,
/// v3's `attributes` of each node.
fn node_attrs(doc: &Value, nodes: &Nodes, v2: bool) -> NodeAttrs {
    let all = if v2 {
        doc.get("metadata")
    } else {
        doc.get("consolidated_metadata")
            .and_then(|c| c.get("metadata"))
    };
    let Some(all) = all.and_then(Value::as_object) else {
        return NodeAttrs::new();
    };
    let arrays = nodes.iter().filter(|(_, n)| matches!(n, Node::Array(_)));
    arrays
        .filter_map(|(rel, _)| {
            let rel_s = rel.to_str()?;
            let found = if v2 {
                all.get(&format!("{rel_s}/{}", attrs::ZATTRS))
            } else {
                all.get(rel_s).and_then(|n| n.get("attributes"))
            };
            let a = attrs::from_json(found?).map(Arc::new);
            Some((rel.clone(), a.map_err(|e| e.to_string())))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_have_their_attributes() {
        let v2 = br#"{"metadata": {
            "a/.zarray": {"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "<i4",
                "compressor": null, "fill_value": 0, "order": "C", "filters": null},
            "a/.zattrs": {"units": "m"},
            "g/.zgroup": {"zarr_format": 2}, "g/.zattrs": {"x": 1}}}"#;
        let (nodes, attrs) = parse_with_attrs(v2, true).unwrap().unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!(attrs.len(), 1);
        let a = attrs[&PathBuf::from("a")].as_ref().unwrap();
        assert_eq!(
            a.pairs,
            vec![("user.zarr.units".into(), br#""m""#.to_vec())]
        );
    }
}
