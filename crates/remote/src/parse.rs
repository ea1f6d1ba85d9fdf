//! Pure parsers: the manifest, the S3-style XML listing, Caterva2's list.

pub use crate::names::{showable, showable_path, Skipped};
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

/// A manifest's lines: `(path, size)` each.
pub type Items = Vec<(String, Option<u64>)>;

/// A manifest (see the crate docs): `(path, size)` per line, and the
/// paths left out (not [`showable_path`]).
pub fn manifest(text: &str) -> Result<(Items, Skipped), String> {
    let mut out = Vec::new();
    let mut skipped = Skipped::default();
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
        if showable_path(path) {
            out.push((path.to_string(), size));
        } else {
            skipped.skip(path);
        }
    }
    Ok((out, skipped))
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
    /// Keys and prefixes are URL-encoded (`<EncodingType>url`).
    pub encoded: bool,
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
                    [_, "EncodingType"] => page.encoded = t == "url",
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
/// listed directory (all levels below it), and those left out (not
/// [`showable_path`]).
pub fn caterva2_list(body: &[u8]) -> Result<(Vec<String>, Skipped), String> {
    let mut skipped = Skipped::default();
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("list answer is not JSON: {e}"))?;
    let items = v.as_array().ok_or("list answer is not a JSON array")?;
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        let p = it.as_str().ok_or("list answer holds a non-string")?;
        if showable_path(p) {
            out.push(p.to_string());
        } else {
            skipped.skip(p);
        }
    }
    Ok((out, skipped))
}

/// A `Content-Range: bytes A-B/TOTAL` header: `(A, B, TOTAL)`, `B`
/// inclusive, `A <= B < TOTAL`.
pub fn content_range(v: &str) -> Option<(u64, u64, u64)> {
    let (range, total) = v.trim().strip_prefix("bytes ")?.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    let num = |s: &str| {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    let (a, b, total) = (num(a)?, num(b)?, num(total)?);
    (a <= b && b < total).then_some((a, b, total))
}

/// An HTTP date (`Last-Modified`).
pub fn http_date(v: &str) -> Option<SystemTime> {
    chrono::DateTime::parse_from_rfc2822(v.trim())
        .ok()
        .map(SystemTime::from)
}

/// Is `etag` a strong ETag (one `If-Match` compares byte for byte)?
pub fn strong_etag(etag: &str) -> bool {
    !etag.starts_with("W/")
}

/// The words of an S3 error document (`<Error><Code>..</Code><Message>..`):
/// `"Code: Message"`, printable characters only, at most 200; `None` if
/// the body is not one.
pub fn s3_error(body: &[u8]) -> Option<String> {
    use quick_xml::events::Event;
    let doc = std::str::from_utf8(body).ok()?;
    let mut r = quick_xml::Reader::from_str(doc);
    let (mut code, mut message, mut field) = (None, None, None);
    loop {
        match r.read_event().ok()? {
            Event::Start(e) => field = Some(e.local_name().as_ref().to_vec()),
            Event::Text(t) => {
                let t = t.decode().ok()?.trim().to_string();
                match field.as_deref() {
                    Some(b"Code") => code = Some(t),
                    Some(b"Message") => message = Some(t),
                    _ => {}
                }
            }
            Event::End(_) => field = None,
            Event::Eof => break,
            _ => {}
        }
    }
    let words = match (code?, message) {
        (c, Some(m)) => format!("{c}: {m}"),
        (c, None) => c,
    };
    Some(
        words
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_lines() {
        let (m, skipped) = manifest("# comment\n12 a/b.b2frame\r\n\nc d.b2nd\n7\n00 z\n").unwrap();
        assert_eq!(skipped.count, 0);
        assert_eq!(
            m,
            vec![
                ("a/b.b2frame".into(), Some(12)),
                ("c d.b2nd".into(), None),
                ("7".into(), None),
                ("z".into(), Some(0)),
            ]
        );
        let bad = "1 ../etc/passwd\nok\n/abs\na//b\nnul\0.b2nd\nend/\n";
        let (m, skipped) = manifest(bad).unwrap();
        assert_eq!(m, vec![("ok".into(), None)]);
        assert_eq!(skipped.count, 5);
        assert!(manifest("99999999999999999999999 x").is_err());
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
        assert!(!p.encoded);
        let enc = "<ListBucketResult><EncodingType>url</EncodingType>\
            <Contents><Key>a%01b</Key><Size>1</Size></Contents></ListBucketResult>";
        let p = xml_listing(enc).unwrap();
        assert!(p.encoded);
        assert_eq!(p.objects[0].0, "a%01b");
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
        let (l, skipped) =
            caterva2_list(br#"["a.b2nd", "d/e.b2frame", "../x", "", "n\u0000"]"#).unwrap();
        assert_eq!(l, vec!["a.b2nd", "d/e.b2frame"]);
        assert_eq!(skipped.count, 3);
        assert!(caterva2_list(b"{}").is_err());
        assert!(caterva2_list(b"[1]").is_err());
    }

    #[test]
    fn answer_headers() {
        assert_eq!(content_range("bytes 0-99/1000"), Some((0, 99, 1000)));
        assert_eq!(content_range(" bytes 5-5/6 "), Some((5, 5, 6)));
        assert_eq!(content_range("bytes 9-1/10"), None);
        assert_eq!(content_range("bytes 0-10/10"), None);
        assert_eq!(content_range("bytes */10"), None);
        assert_eq!(content_range("bytes -1-2/3"), None);
        assert_eq!(content_range("bytes 0-1/99999999999999999999999"), None);
        assert_eq!(content_range("items 0-1/3"), None);
        let t = http_date("Tue, 02 Jan 2024 03:04:05 GMT").unwrap();
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs, 1_704_164_645);
        assert!(http_date("yesterday").is_none());
        assert!(strong_etag("\"abc\""));
        assert!(!strong_etag("W/\"abc\""));
    }

    #[test]
    fn s3_error_documents_in_words() {
        let doc = b"<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code>\
            <Message>Access Denied</Message><RequestId>1</RequestId></Error>";
        assert_eq!(
            s3_error(doc).as_deref(),
            Some("AccessDenied: Access Denied")
        );
        assert_eq!(
            s3_error(b"<Error><Code>X\x01</Code></Error>").as_deref(),
            Some("X")
        );
        assert_eq!(s3_error(b"<html>oops</html>"), None);
        assert_eq!(s3_error(b"\xff"), None);
    }
}
