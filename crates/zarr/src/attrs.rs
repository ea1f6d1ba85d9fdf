//! An array's attributes (v2 `.zattrs`, v3 the `attributes` of
//! `zarr.json`) as extended attributes: one `user.zarr.KEY` per top-level
//! key, its value the key's JSON value as compact JSON text (a string
//! keeps its quotes, so that every value reads back with a JSON parser).
//!
//! Bounded as Linux bounds extended attributes: a name longer than
//! [`MAX_NAME_BYTES`] or a value longer than [`MAX_VALUE_BYTES`] is left
//! out, and names stop once their list would pass [`MAX_LIST_BYTES`].

use crate::{Error, Result};
use serde_json::{Map, Value};

/// A v2 node's attributes file.
pub const ZATTRS: &str = ".zattrs";
/// Largest attributes document read, in bytes.
pub const MAX_DOC_BYTES: u64 = 1 << 20;
/// The prefix of every name.
pub const PREFIX: &str = "user.zarr.";
/// Longest name (`XATTR_NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;
/// Longest value (`XATTR_SIZE_MAX`).
pub const MAX_VALUE_BYTES: usize = 1 << 16;
/// Longest list of names, each with its NUL (`XATTR_LIST_MAX`).
pub const MAX_LIST_BYTES: usize = 1 << 16;

/// Attributes as (name, value) pairs, in the order of their keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attrs {
    pub pairs: Vec<(String, Vec<u8>)>,
    /// Keys left out (too long a name or value, or past the list's size).
    pub left_out: Vec<String>,
}

/// The attributes of a `.zattrs` (`v2`) or of a `zarr.json` (none when it
/// has no `attributes`).
pub fn parse(text: &[u8], v2: bool) -> Result<Attrs> {
    let doc: Value = serde_json::from_slice(text)
        .map_err(|e| Error::corrupt(format!("attributes are not JSON: {e}")))?;
    if v2 {
        from_json(&doc)
    } else {
        doc.get("attributes")
            .map_or(Ok(Attrs::default()), from_json)
    }
}

/// The attributes of a JSON object.
pub fn from_json(doc: &Value) -> Result<Attrs> {
    let obj = doc
        .as_object()
        .ok_or_else(|| Error::corrupt("attributes are not a JSON object"))?;
    Ok(from_object(obj))
}

fn from_object(obj: &Map<String, Value>) -> Attrs {
    let mut out = Attrs::default();
    let mut listed = 0;
    for (key, v) in obj {
        let name = format!("{PREFIX}{key}");
        // Compact JSON of a parsed value cannot fail to serialise.
        let value = serde_json::to_vec(v).unwrap_or_default();
        let fits = name.len() <= MAX_NAME_BYTES
            && !name.contains('\0')
            && value.len() <= MAX_VALUE_BYTES
            && listed + name.len() < MAX_LIST_BYTES;
        if fits {
            listed += name.len() + 1;
            out.pairs.push((name, value));
        } else {
            out.left_out.push(key.chars().take(64).collect());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_is_one_attribute_of_compact_json() {
        let a = parse(br#"{"title": "t", "n": [1, 2], "o": {"a": null}}"#, true).unwrap();
        let got: Vec<(&str, &[u8])> = a
            .pairs
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let want: Vec<(&str, &[u8])> = vec![
            ("user.zarr.n", b"[1,2]"),
            ("user.zarr.o", br#"{"a":null}"#),
            ("user.zarr.title", br#""t""#),
        ];
        assert_eq!(got, want);
        assert!(a.left_out.is_empty());
    }

    #[test]
    fn v3_attributes_are_those_of_zarr_json() {
        let a = parse(
            br#"{"node_type": "array", "attributes": {"u": "m"}}"#,
            false,
        )
        .unwrap();
        assert_eq!(a.pairs, vec![("user.zarr.u".into(), br#""m""#.to_vec())]);
        let none = parse(br#"{"node_type": "array"}"#, false).unwrap();
        assert!(none.pairs.is_empty());
    }

    #[test]
    fn bad_documents_are_errors() {
        for bad in [&b"{"[..], b"[1]", b"\"s\"", b"\xff"] {
            assert!(parse(bad, true).is_err(), "{bad:?}");
        }
        assert!(parse(br#"{"attributes": 3}"#, false).is_err());
    }

    #[test]
    fn too_long_names_and_values_are_left_out() {
        let long_key = "k".repeat(MAX_NAME_BYTES);
        let long_value = "v".repeat(MAX_VALUE_BYTES);
        let doc = serde_json::json!({ long_key.clone(): 1, "big": long_value, "ok": 2 });
        let a = from_json(&doc).unwrap();
        assert_eq!(a.pairs, vec![("user.zarr.ok".into(), b"2".to_vec())]);
        assert_eq!(a.left_out.len(), 2);
    }

    #[test]
    fn names_stop_at_the_list_size() {
        let doc: Map<String, Value> = (0..2000)
            .map(|i| (format!("{i:0>60}"), Value::from(i)))
            .collect();
        let a = from_object(&doc);
        let listed: usize = a.pairs.iter().map(|(n, _)| n.len() + 1).sum();
        assert!(listed <= MAX_LIST_BYTES, "{listed}");
        assert_eq!(a.pairs.len() + a.left_out.len(), 2000);
        assert!(!a.left_out.is_empty());
    }
}
