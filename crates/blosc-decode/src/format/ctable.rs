//! The description python-blosc2 (4.2 and later) keeps of a CTable: the
//! vlmeta of the table's `_meta.b2f` frame holds `kind` (the text
//! `"ctable"`) and `schema`, JSON text naming the stored columns in order
//! with their kinds:
//!
//! ```json
//! {"version": 1, "columns": [{"name": "id", "kind": "int64"},
//!   {"name": "s", "kind": "string", "max_length": 5}], "n_rows": 8}
//! ```
//!
//! Each column is the 1-D array `_cols/NAME.b2nd`, and `_valid_rows.b2nd`
//! a bool mask over the same capacity: the table's rows are the positions
//! the mask holds true (`n_rows`, when written, is their count).
//! `numpy.asarray(table)` stacks the stored values of the valid rows into
//! records, fields in schema order. Only columns of one fixed-size value
//! per row are read here (numbers, bool, fixed strings and bytes,
//! timestamps); variable-length, list, dictionary, N-d and nested columns
//! are refused by name.

use crate::format::msgpack::Reader;
use serde_json::Value;

/// The vlmeta entry naming what the frame describes.
pub const KIND_KEY: &str = "kind";
/// Its value for a CTable.
pub const KIND_CTABLE: &str = "ctable";
/// The vlmeta entry holding the schema.
pub const SCHEMA_KEY: &str = "schema";
/// Columns in a table, at most.
pub const MAX_COLUMNS: usize = 4096;
/// Schema text read, at most.
pub const MAX_SCHEMA_BYTES: usize = 1 << 20;

/// A fixed-size column kind: the NumPy kind characters its stored dtype
/// may have, and its item size (`None`: any, as fixed strings).
struct Kind {
    name: &'static str,
    codes: &'static [char],
    size: Option<u64>,
}

const KINDS: &[Kind] = &[
    kind("int8", &['i'], 1),
    kind("int16", &['i'], 2),
    kind("int32", &['i'], 4),
    kind("int64", &['i'], 8),
    kind("uint8", &['u'], 1),
    kind("uint16", &['u'], 2),
    kind("uint32", &['u'], 4),
    kind("uint64", &['u'], 8),
    kind("float32", &['f'], 4),
    kind("float64", &['f'], 8),
    kind("complex64", &['c'], 8),
    kind("complex128", &['c'], 16),
    kind("bool", &['b'], 1),
    kind("timestamp", &['i', 'M'], 8),
    Kind {
        name: "string",
        codes: &['U'],
        size: None,
    },
    Kind {
        name: "bytes",
        codes: &['S'],
        size: None,
    },
];

const fn kind(name: &'static str, codes: &'static [char], size: u64) -> Kind {
    Kind {
        name,
        codes,
        size: Some(size),
    }
}

/// One stored column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Its name (the file `_cols/NAME.b2nd`).
    pub name: String,
    /// The schema's kind (`int64`, `string`...).
    pub kind: String,
}

impl Column {
    /// Does a stored NumPy type string (`'<i8'`, `'|S3'`) of `size` bytes
    /// fit this column's kind?
    pub fn fits(&self, code: &str, size: u64) -> bool {
        let Some(k) = KINDS.iter().find(|k| k.name == self.kind) else {
            return false;
        };
        let c = code.chars().nth(1);
        c.is_some_and(|c| k.codes.contains(&c)) && k.size.is_none_or(|s| s == size) && size > 0
    }

    /// The column's file in the table, relative to the table's root.
    pub fn key(&self) -> String {
        format!("_cols/{}.b2nd", self.name)
    }
}

/// What a table's schema says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// The columns, in order.
    pub columns: Vec<Column>,
    /// The count of valid rows, if recorded.
    pub n_rows: Option<u64>,
}

/// Is a frame's vlmeta (name, msgpack value) a CTable's?
pub fn is_ctable(vlmeta: &[(String, Vec<u8>)]) -> bool {
    text(vlmeta, KIND_KEY).is_some_and(|k| k == KIND_CTABLE)
}

/// The text value of vlmeta entry `key`.
fn text<'a>(vlmeta: &'a [(String, Vec<u8>)], key: &str) -> Option<&'a str> {
    let (_, v) = vlmeta.iter().find(|(n, _)| n == key)?;
    Reader::new(v).read().ok()?.as_str()
}

/// The schema of a CTable's `_meta.b2f` vlmeta.
pub fn schema_of(vlmeta: &[(String, Vec<u8>)]) -> Result<Schema, String> {
    if !is_ctable(vlmeta) {
        return Err("not a CTable (no vlmeta kind \"ctable\")".into());
    }
    let s = text(vlmeta, SCHEMA_KEY).ok_or("no schema text in the vlmeta")?;
    parse(s.as_bytes())
}

/// Parse schema JSON text.
pub fn parse(text: &[u8]) -> Result<Schema, String> {
    if text.len() > MAX_SCHEMA_BYTES {
        return Err(format!("schema of {} bytes: too long", text.len()));
    }
    let v: Value = serde_json::from_slice(text).map_err(|e| format!("schema: {e}"))?;
    let obj = v.as_object().ok_or("schema is not a JSON object")?;
    if let Some(m) = obj.get("metadata").and_then(Value::as_object) {
        if m.contains_key("nested") || m.contains_key("struct_parents") {
            return Err("schema with nested (struct) columns: not read".into());
        }
    }
    let cols = obj
        .get("columns")
        .and_then(Value::as_array)
        .ok_or("schema has no list of columns")?;
    if cols.is_empty() || cols.len() > MAX_COLUMNS {
        return Err(format!("schema lists {} columns", cols.len()));
    }
    let mut columns: Vec<Column> = Vec::with_capacity(cols.len());
    for c in cols {
        let col = column(c)?;
        if columns.iter().any(|o| o.name == col.name) {
            return Err(format!("column {:?} listed twice", col.name));
        }
        columns.push(col);
    }
    let n_rows = match obj.get("n_rows") {
        None | Some(Value::Null) => None,
        Some(n) => Some(n.as_u64().ok_or("schema: n_rows is not a count")?),
    };
    Ok(Schema { columns, n_rows })
}

/// One entry of the schema's columns.
fn column(c: &Value) -> Result<Column, String> {
    let name = c
        .get("name")
        .and_then(Value::as_str)
        .ok_or("a column without a name")?;
    let kind = c
        .get("kind")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("column {name:?} without a kind"))?;
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(format!("column name {name:?} is not a file name"));
    }
    if !KINDS.iter().any(|k| k.name == kind) {
        return Err(format!(
            "column {name:?} of kind {kind:?}: not one fixed-size value per row"
        ));
    }
    Ok(Column {
        name: name.to_string(),
        kind: kind.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_as_python_blosc2_writes_it() {
        let s = parse(
            br#"{"version": 1, "columns": [{"name": "a", "kind": "int64"},
            {"name": "s", "kind": "string", "max_length": 5}], "n_rows": 8}"#,
        )
        .unwrap();
        assert_eq!(s.n_rows, Some(8));
        assert_eq!(s.columns.len(), 2);
        assert!(s.columns[0].fits("<i8", 8));
        assert!(!s.columns[0].fits("<f8", 8));
        assert!(!s.columns[0].fits("<i4", 4));
        assert!(s.columns[1].fits("<U5", 20));
        assert_eq!(s.columns[1].key(), "_cols/s.b2nd");
    }

    #[test]
    fn schemas_refused() {
        for bad in [
            &br#"{"columns": []}"#[..],
            br#"{"columns": [{"name": "a", "kind": "list"}]}"#,
            br#"{"columns": [{"name": "../x", "kind": "int8"}]}"#,
            br#"{"columns": [{"name": "a", "kind": "int8"}, {"name": "a", "kind": "int8"}]}"#,
            br#"{"columns": [{"name": "a", "kind": "int8"}], "n_rows": -1}"#,
            br#"{"columns": [{"name": "a", "kind": "int8"}], "metadata": {"nested": {}}}"#,
            br#"[1]"#,
            b"{",
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
