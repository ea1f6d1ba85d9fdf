//! python-blosc2's EmbedStore (`.b2e`, and the `embed.b2e` of a DictStore,
//! TreeStore or CTable): one super-chunk of bytes (typesize 1) holding the
//! serialized frames of its leaves one after another, and the vlmetalayer
//! `estore_metadata` saying where each key's frame lies.
//!
//! The vlmetalayer's value is msgpack of
//! `{"embed_map": {key: {"offset": o, "length": n}, ...}, "current_offset": e}`,
//! `o` and `n` in bytes of the super-chunk's content. A key that names a
//! remote array holds `{"urlbase": ..., "path": ...}` instead: no bytes here.

use crate::error::{Error, Result};
use crate::format::msgpack::{Reader, Val};

/// The vlmetalayer holding the key map.
pub const VLMETA: &str = "estore_metadata";

/// One key's frame: `length` bytes at `offset` of the store's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key as python-blosc2 writes it (`/a/b`).
    pub key: String,
    /// Where its frame starts in the store's content.
    pub offset: u64,
    /// Bytes of its frame.
    pub length: u64,
}

/// What the key map says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EmbedMap {
    /// The keys with bytes in the store, in the map's order.
    pub entries: Vec<Entry>,
    /// The keys that are references to remote arrays (no bytes here).
    pub references: Vec<String>,
}

/// Read the `estore_metadata` value (its decoded bytes). Every key is text
/// and every range lies in `u64` (`offset + length` does not overflow);
/// whether it lies inside the store is the caller's check.
pub fn parse(value: &[u8]) -> Result<EmbedMap> {
    let top = Reader::new(value).read()?;
    let map = field(&top, "embed_map")
        .ok_or_else(|| Error::corrupt(format!("{VLMETA}: no embed_map")))?;
    let Val::Map(items) = map else {
        return Err(Error::corrupt(format!("{VLMETA}: embed_map is not a map")));
    };
    let mut out = EmbedMap::default();
    for (k, v) in items {
        let key = k
            .as_str()
            .ok_or_else(|| Error::corrupt(format!("{VLMETA}: a key that is not text")))?;
        if field(v, "urlbase").is_some() {
            out.references.push(key.to_string());
            continue;
        }
        let offset = size(v, "offset", key)?;
        let length = size(v, "length", key)?;
        if offset.checked_add(length).is_none() {
            return Err(Error::corrupt(format!(
                "{VLMETA}: {key}: {length} bytes at {offset} overflow"
            )));
        }
        out.entries.push(Entry {
            key: key.to_string(),
            offset,
            length,
        });
    }
    Ok(out)
}

/// The value of the text key `name` in the msgpack map `v`.
fn field<'v, 'a>(v: &'v Val<'a>, name: &str) -> Option<&'v Val<'a>> {
    let Val::Map(items) = v else {
        return None;
    };
    items
        .iter()
        .find(|(k, _)| k.as_str() == Some(name))
        .map(|(_, v)| v)
}

/// The size `name` of the key `key`'s entry `v`.
fn size(v: &Val, name: &str, key: &str) -> Result<u64> {
    field(v, name)
        .and_then(Val::as_int)
        .and_then(|i| u64::try_from(i).ok())
        .ok_or_else(|| Error::corrupt(format!("{VLMETA}: {key}: no {name} that is a size")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value python-blosc2 4.14 wrote for three keys.
    const WRITTEN: &[u8] = b"\x82\xa9embed_map\x83\xa2/a\x82\xa6offset\x00\xa6length\xcd\x02_\xa4/g/b\x82\xa6offset\xcd\x02_\xa6length\xcd\x03\xee\xa2/s\x82\xa6offset\xcd\x06M\xa6length\xcd\x0e\xad\xaecurrent_offset\xcd\x14\xfa";

    #[test]
    fn reads_what_python_blosc2_writes() {
        let m = parse(WRITTEN).unwrap();
        let got: Vec<_> = m
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.offset, e.length))
            .collect();
        assert_eq!(
            got,
            [("/a", 0, 607), ("/g/b", 607, 1006), ("/s", 1613, 3757)]
        );
        assert!(m.references.is_empty());
    }

    #[test]
    fn references_are_set_apart() {
        // {"embed_map": {"/r": {"urlbase": "u", "path": "p"}}}
        let v = b"\x81\xa9embed_map\x81\xa2/r\x82\xa7urlbase\xa1u\xa4path\xa1p";
        let m = parse(v).unwrap();
        assert!(m.entries.is_empty());
        assert_eq!(m.references, ["/r"]);
    }

    #[test]
    fn refuses_what_is_not_a_map_of_sizes() {
        for bad in [
            &b""[..],
            b"\x80",                                          // no embed_map
            b"\x81\xa9embed_map\x90",                         // not a map
            b"\x81\xa9embed_map\x81\x01\x80",                 // key not text
            b"\x81\xa9embed_map\x81\xa1k\x81\xa6offset\x00",  // no length
            b"\x81\xa9embed_map\x81\xa1k\x82\xa6offset\xff\xa6length\x00", // negative
            b"\x81\xa9embed_map\x81\xa1k\x82\xa6offset\xcf\xff\xff\xff\xff\xff\xff\xff\xff\xa6length\x02",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
