//! Pure parsers: the manifest, the S3-style XML listing, Caterva2's list.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

/// Directories and files from a flat list of paths.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tree {
    levels: BTreeMap<String, Level>,
}

/// One directory of a [`Tree`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Level {
    pub dirs: BTreeSet<String>,
    /// Name -> size, if known.
    pub files: BTreeMap<String, Option<u64>>,
}

impl Tree {
    /// A tree of `(path, size)`; paths `/`-separated, relative.
    pub fn new(items: impl IntoIterator<Item = (String, Option<u64>)>) -> Self {
        let mut t = Tree::default();
        t.levels.insert(String::new(), Level::default());
        for (path, size) in items {
            let (dir, name) = path.rsplit_once('/').unwrap_or(("", &path));
            t.levels
                .entry(dir.to_string())
                .or_default()
                .files
                .insert(name.to_string(), size);
            let mut d = dir;
            while !d.is_empty() {
                let (parent, last) = d.rsplit_once('/').unwrap_or(("", d));
                t.levels
                    .entry(parent.to_string())
                    .or_default()
                    .dirs
                    .insert(last.to_string());
                d = parent;
            }
        }
        t
    }

    /// The directory `dir` ("" for the top), if it is one.
    pub fn level(&self, dir: &str) -> Option<&Level> {
        self.levels.get(dir)
    }

    /// The size of file `path`: None if no such file, Some(None) if unknown.
    pub fn file(&self, path: &str) -> Option<Option<u64>> {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        self.levels.get(dir)?.files.get(name).copied()
    }
}

/// Is `p` a usable relative path (no empty, `.` or `..` components)?
pub fn clean_path(p: &str) -> bool {
    !p.is_empty() && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// A manifest (see the crate docs): `(path, size)` per line.
pub fn manifest(text: &str) -> Result<Vec<(String, Option<u64>)>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (size, path) = match line.split_once(' ') {
            Some((s, p)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                let size = s
                    .parse::<u64>()
                    .map_err(|_| format!("line {}: size {s} too large", n + 1))?;
                (Some(size), p)
            }
            _ => (None, line),
        };
        if !clean_path(path) {
            return Err(format!("line {}: `{path}` is not a relative path", n + 1));
        }
        out.push((path.to_string(), size));
    }
    Ok(out)
}

/// One page of an S3 `ListObjectsV2` answer.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct XmlPage {
    /// Full keys with size, ETag and mtime.
    pub objects: Vec<(String, u64, Option<String>, Option<SystemTime>)>,
    /// Full common prefixes (ending in `/`).
    pub prefixes: Vec<String>,
    /// The token for the next page, if truncated.
    pub next: Option<String>,
}

/// Parse a `ListBucketResult` document.
pub fn xml_listing(doc: &str) -> Result<XmlPage, String> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_str(doc);
    let mut page = XmlPage::default();
    let mut path: Vec<String> = Vec::new();
    let mut seen_root = false;
    let (mut key, mut size, mut etag, mut mtime) = (None, None, None, None);
    let mut truncated = false;
    let mut text = String::new();
    loop {
        match r.read_event().map_err(|e| format!("XML listing: {e}"))? {
            Event::Start(e) => {
                let name = String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
                if path.is_empty() {
                    if name != "ListBucketResult" {
                        return Err(format!("not an S3 listing (<{name}>)"));
                    }
                    seen_root = true;
                }
                path.push(name);
                text.clear();
            }
            Event::Text(t) => {
                text.push_str(&t.decode().map_err(|e| format!("XML listing: {e}"))?);
            }
            Event::GeneralRef(g) => {
                let c = match g
                    .resolve_char_ref()
                    .map_err(|e| format!("XML listing: {e}"))?
                {
                    Some(c) => c.to_string(),
                    None => {
                        let name = g.decode().map_err(|e| format!("XML listing: {e}"))?;
                        quick_xml::escape::resolve_predefined_entity(&name)
                            .ok_or_else(|| format!("XML listing: unknown entity &{name};"))?
                            .to_string()
                    }
                };
                text.push_str(&c);
            }
            Event::End(_) => {
                let t = std::mem::take(&mut text).trim().to_string();
                let p: Vec<&str> = path.iter().map(String::as_str).collect();
                match p.as_slice() {
                    [_, "Contents"] => {
                        let k = key.take().ok_or("XML listing: <Contents> without <Key>")?;
                        let s = size
                            .take()
                            .ok_or("XML listing: <Contents> without <Size>")?;
                        page.objects.push((k, s, etag.take(), mtime.take()));
                    }
                    [_, "Contents", "Key"] => key = Some(t),
                    [_, "Contents", "Size"] => {
                        size = Some(t.parse().map_err(|_| format!("XML listing: size `{t}`"))?)
                    }
                    [_, "Contents", "ETag"] => etag = Some(t),
                    [_, "Contents", "LastModified"] => {
                        mtime = chrono::DateTime::parse_from_rfc3339(&t)
                            .ok()
                            .map(SystemTime::from)
                    }
                    [_, "CommonPrefixes", "Prefix"] => page.prefixes.push(t),
                    [_, "IsTruncated"] => truncated = t == "true",
                    [_, "NextContinuationToken"] => page.next = Some(t),
                    _ => {}
                }
                path.pop();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !seen_root {
        return Err("not an S3 listing (empty)".into());
    }
    if !truncated {
        page.next = None;
    } else if page.next.is_none() {
        return Err("XML listing truncated without a continuation token".into());
    }
    Ok(page)
}

/// Caterva2's `/api/list` answer: a JSON array of paths relative to the
/// listed directory (all levels below it).
pub fn caterva2_list(body: &[u8]) -> Result<Vec<String>, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("list answer is not JSON: {e}"))?;
    let items = v.as_array().ok_or("list answer is not a JSON array")?;
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        let p = it.as_str().ok_or("list answer holds a non-string")?;
        if clean_path(p) {
            out.push(p.to_string());
        } else {
            log::warn!("Caterva2 listing: skipping `{p}` (not a relative path)");
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_lines() {
        let m = manifest("# comment\n12 a/b.b2frame\r\n\nc d.b2nd\n7\n00 z\n").unwrap();
        assert_eq!(
            m,
            vec![
                ("a/b.b2frame".into(), Some(12)),
                ("c d.b2nd".into(), None),
                ("7".into(), None),
                ("z".into(), Some(0)),
            ]
        );
        assert!(manifest("1 ../etc/passwd").unwrap_err().contains("line 1"));
        assert!(manifest("ok\n/abs").unwrap_err().contains("line 2"));
        assert!(manifest("99999999999999999999999 x").is_err());
        assert!(manifest("a//b").is_err());
    }

    #[test]
    fn tree_levels() {
        let t = Tree::new(vec![
            ("a/b/c.b2nd".to_string(), Some(3)),
            ("a/x".to_string(), None),
            ("top".to_string(), Some(1)),
        ]);
        let root = t.level("").unwrap();
        assert_eq!(root.dirs.iter().collect::<Vec<_>>(), vec!["a"]);
        assert_eq!(root.files.get("top"), Some(&Some(1)));
        assert_eq!(
            t.level("a").unwrap().dirs.iter().collect::<Vec<_>>(),
            vec!["b"]
        );
        assert_eq!(t.file("a/b/c.b2nd"), Some(Some(3)));
        assert_eq!(t.file("a/x"), Some(None));
        assert_eq!(t.file("a"), None);
        assert!(t.level("nope").is_none());
    }

    #[test]
    fn s3_xml_listing() {
        let doc = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>b</Name><Prefix>d/</Prefix><KeyCount>3</KeyCount>
  <IsTruncated>true</IsTruncated><NextContinuationToken>tok&amp;1</NextContinuationToken>
  <Contents><Key>d/x.b2frame</Key><LastModified>2024-01-02T03:04:05.000Z</LastModified>
    <ETag>&quot;abc&quot;</ETag><Size>1234</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>d/y &amp; z</Key><Size>0</Size></Contents>
  <CommonPrefixes><Prefix>d/sub/</Prefix></CommonPrefixes>
</ListBucketResult>"#;
        let p = xml_listing(doc).unwrap();
        assert_eq!(p.objects.len(), 2);
        assert_eq!(p.objects[0].0, "d/x.b2frame");
        assert_eq!(p.objects[0].1, 1234);
        assert_eq!(p.objects[0].2.as_deref(), Some("\"abc\""));
        let t = p.objects[0].3.unwrap();
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs, 1_704_164_645);
        assert_eq!(p.objects[1].0, "d/y & z");
        assert_eq!(p.prefixes, vec!["d/sub/"]);
        assert_eq!(p.next.as_deref(), Some("tok&1"));
    }

    #[test]
    fn xml_that_is_not_a_listing() {
        assert!(xml_listing("<html><body>hi</body></html>").is_err());
        assert!(xml_listing("").is_err());
        assert!(xml_listing(
            "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>"
        )
        .is_err());
        let t = "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
        assert!(xml_listing(t).unwrap_err().contains("continuation"));
    }

    #[test]
    fn caterva2_list_answer() {
        let l = caterva2_list(br#"["a.b2nd", "d/e.b2frame", "../x", ""]"#).unwrap();
        assert_eq!(l, vec!["a.b2nd", "d/e.b2frame"]);
        assert!(caterva2_list(b"{}").is_err());
        assert!(caterva2_list(b"[1]").is_err());
    }
}
