//! Listing requests: a manifest, an S3 `ListObjectsV2` (from a bucket or
//! an S3-style listing over plain HTTP), Caterva2's `/api/list`; each
//! name the store gives taken exactly, and left out when it cannot be a
//! file name.

use crate::answer;
use crate::connect::{join, Backend};
use crate::error::{denied, failed, not_found};
use crate::names::{showable, Skipped};
use crate::net::block_on;
use crate::parse::{self, Tree};
use crate::{url, Core, Listing, Object};
use std::io;
use std::sync::Arc;

type Result<T, E = io::Error> = std::result::Result<T, E>;

/// One GET of `url` for a document: status and body (retried after a
/// 5xx, a 429 or a failure, within the read budget).
pub async fn get(core: &Core, url: &str) -> Result<(u16, bytes::Bytes)> {
    let f = &core.fetcher;
    let what = format!("GET {url}");
    f.retried(&what, || async {
        let res = f.send(url, &[]).await?;
        let status = res.status().as_u16();
        if status == 429 || status >= 500 {
            return Err(answer::failed(res).await);
        }
        Ok((status, answer::body(res).await?))
    })
    .await
    .map_err(|e| e.named(&what).into_io())
}

/// The manifest (fetched once).
pub fn manifest(core: &Arc<Core>) -> Result<Arc<Tree>> {
    let Backend::Http { base, manifest, .. } = &core.backend else {
        unreachable!()
    };
    if let Some(t) = manifest.lock().clone() {
        return Ok(t);
    }
    let name = core.opts.manifest.as_deref().unwrap_or_default();
    let url = url::under(base, name);
    let (status, body) = block_on(get(core, &url))?;
    if status != 200 {
        return Err(failed(format!("GET {url}: {status}")));
    }
    let text = std::str::from_utf8(&body).map_err(|_| failed(format!("{url}: not UTF-8")))?;
    let (items, skipped) = parse::manifest(text).map_err(|e| failed(format!("{url}: {e}")))?;
    skipped.log(&format!("manifest {url}"));
    let t = Arc::new(Tree::new(items));
    *manifest.lock() = Some(t.clone());
    Ok(t)
}

/// Caterva2's `/api/list/<root/dir>`: paths under it, all levels, and
/// those left out.
pub async fn crate_list(core: &Core, url: &str, path: &str) -> Result<(Vec<String>, Skipped)> {
    let u = format!("{url}/api/list/{}", url::path(path));
    let (status, body) = get(core, &u).await?;
    match status {
        200 => parse::caterva2_list(&body).map_err(|e| failed(format!("GET {u}: {e}"))),
        404 => Err(not_found(format!("GET {u}: 404"))),
        401 | 403 => Err(denied(format!("GET {u}: {status}"))),
        s => Err(failed(format!("GET {u}: {s}"))),
    }
}

/// The most entries one directory's listing may have (a listing is held
/// whole, about 700 bytes an entry in the daemon).
pub const MAX_ENTRIES: usize = 1 << 22;

/// The most bytes of names one directory's listing may keep (besides the
/// entries' fixed size; a name is at most 255 bytes).
pub const MAX_NAME_BYTES: usize = 256 << 20;

/// The pages of one listing: a listing ends, even from a server whose
/// continuation tokens would lead on for ever, and keeps a bounded number
/// of entries and bytes of names.
#[derive(Default)]
pub struct Paging {
    seen: std::collections::HashSet<String>,
    entries: usize,
    bytes: usize,
}

impl Paging {
    /// After a page of `entries` entries, their names `bytes` long, whose
    /// next-page token is `token`: the token to ask with next, `None` at
    /// the end; an error past [`MAX_ENTRIES`], past [`MAX_NAME_BYTES`] or
    /// at a token seen before (`what` names the listing).
    pub fn next(
        &mut self,
        token: Option<String>,
        entries: usize,
        bytes: usize,
        what: &str,
    ) -> Result<Option<String>> {
        self.entries += entries;
        self.bytes += bytes;
        if self.entries > MAX_ENTRIES || self.bytes > MAX_NAME_BYTES {
            let m = format!(
                "{what}: more than {MAX_ENTRIES} entries or {} MiB of names, more than one directory may hold",
                MAX_NAME_BYTES >> 20
            );
            return Err(failed(m));
        }
        match token {
            Some(t) if !self.seen.insert(t.clone()) => {
                let m = format!("{what}: the server gave the continuation token {t:?} again (its listing would not end)");
                Err(failed(m))
            }
            t => Ok(t),
        }
    }
}

/// An S3-style XML listing of `dir` under `base` (plain HTTP): at `base`
/// itself, else at a shorter URL with the rest of the path (decoded: the
/// URL is as typed) as the key prefix.
pub async fn xml_list(core: &Core, base: &str, dir: &str) -> Result<Listing> {
    let (scheme_host, path) = match base.find("://").map(|i| i + 3) {
        Some(i) => match base[i..].find('/') {
            Some(j) => (&base[..i + j], base[i + j + 1..].to_string()),
            None => (base, String::new()),
        },
        None => (base, String::new()),
    };
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut last = None;
    for k in (0..=segs.len()).rev() {
        let list_url = [scheme_host]
            .into_iter()
            .chain(segs[..k].iter().copied())
            .collect::<Vec<_>>()
            .join("/");
        let typed = segs[k..].join("/");
        let rest = percent_encoding::percent_decode_str(&typed).decode_utf8_lossy();
        let keys = Keys::dir(&join(&rest, dir));
        match xml_pages(core, &format!("{list_url}/"), &keys, false).await {
            Ok(l) => return Ok(l.expect("a whole listing")),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| failed(format!("{base}: no listing"))))
}

/// The keys a listing asks for: those starting with `dir` + `start`, named
/// by what follows `dir`.
pub struct Keys {
    /// The directory's key prefix: "" or ending in `/`.
    pub dir: String,
    /// The start of the names wanted (no `/`; "" for all).
    pub start: String,
}

impl Keys {
    /// All the names of the directory `full` (the whole key, "" for the
    /// top).
    pub fn dir(full: &str) -> Keys {
        Keys::start(full, "")
    }

    /// The names of the directory `full` starting with `start`.
    pub fn start(full: &str, start: &str) -> Keys {
        let dir = if full.is_empty() {
            String::new()
        } else {
            format!("{full}/")
        };
        Keys {
            dir,
            start: start.to_string(),
        }
    }
}

/// A `ListObjectsV2` listing by `/` of `keys` at `list_url` (ending in
/// `/`), page by page; `one_page`: only its first page (`None` if there
/// are more). Keys URL-encoded by the server (`encoding-type=url`, which
/// S3 honours) are decoded; names that cannot be file names are left out
/// (one log line for the listing).
pub async fn xml_pages(
    core: &Core,
    list_url: &str,
    keys: &Keys,
    one_page: bool,
) -> Result<Option<Listing>> {
    let prefix = format!("{}{}", keys.dir, keys.start);
    let what = format!("list {list_url}?prefix={prefix}");
    let mut l = Listing::default();
    let mut skipped = Skipped::default();
    let mut paging = Paging::default();
    let mut token: Option<String> = None;
    loop {
        let mut u = format!(
            "{list_url}?list-type=2&delimiter=%2F&encoding-type=url&prefix={}",
            url::query(&prefix)
        );
        if let Some(t) = &token {
            u.push_str(&format!("&continuation-token={}", url::query(t)));
        }
        let (status, body) = get(core, &u).await?;
        if status != 200 {
            let words = parse::s3_error(&body).map(|w| format!(" ({w})"));
            let m = format!("GET {u}: {status}{}", words.unwrap_or_default());
            return Err(failed(m));
        }
        let text = String::from_utf8_lossy(&body);
        let page = parse::xml_listing(&text).map_err(|e| failed(format!("GET {u}: {e}")))?;
        drop(text);
        let (n, bytes) = add_page(
            &mut l,
            page.objects,
            page.prefixes,
            page.encoded,
            keys,
            &mut skipped,
        );
        if one_page && page.next.is_some() {
            return Ok(None);
        }
        token = paging.next(page.next, n, bytes, &what)?;
        if token.is_none() {
            break;
        }
    }
    // Once per listing of a directory, not at each lookup of a name.
    if keys.start.is_empty() {
        skipped.log(&what);
    }
    if !one_page && !keys.dir.is_empty() && l.dirs.is_empty() && l.objects.is_empty() {
        return Err(not_found(format!("{what}: nothing there")));
    }
    Ok(Some(l))
}

/// The name in the directory `dir` (its key prefix) of the listed `key`
/// (a common prefix, ending in `/`, if `is_dir`), URL-decoded if
/// `encoded`; `None` if it cannot be a file name.
fn entry_name(key: &str, is_dir: bool, encoded: bool, dir: &str) -> Option<String> {
    let k = match encoded {
        true => url::listed(key)?,
        false => key.to_string(),
    };
    let rest = k.strip_prefix(dir)?;
    let rest = if is_dir {
        rest.strip_suffix('/')?
    } else {
        rest
    };
    showable(rest).then(|| rest.to_string())
}

type XmlObject = (String, u64, Option<String>, Option<std::time::SystemTime>);

/// The entries of a page added to `l` by name: how many, and the bytes of
/// their names.
fn add_page(
    l: &mut Listing,
    objects: Vec<XmlObject>,
    prefixes: Vec<String>,
    encoded: bool,
    keys: &Keys,
    skipped: &mut Skipped,
) -> (usize, usize) {
    let (mut n, mut bytes) = (0, 0);
    let mut name_of = |key: String, is_dir: bool| {
        let name = entry_name(&key, is_dir, encoded, &keys.dir);
        match &name {
            Some(s) => (n, bytes) = (n + 1, bytes + s.len()),
            None => skipped.skip(&key),
        }
        name
    };
    let dirs: Vec<String> = prefixes
        .into_iter()
        .filter_map(|d| name_of(d, true))
        .collect();
    let mut objs = Vec::new();
    for (k, len, etag, mtime) in objects {
        if let Some(key) = name_of(k, false) {
            objs.push(Object {
                key,
                len,
                etag,
                mtime,
            });
        }
    }
    l.dirs.extend(dirs);
    l.objects.extend(objs);
    (n, bytes)
}

#[cfg(test)]
mod tests {
    use super::{entry_name, Paging, MAX_ENTRIES, MAX_NAME_BYTES};

    #[test]
    fn a_listing_ends_at_a_token_seen_before_or_past_its_bounds() {
        let mut p = Paging::default();
        let next = |p: &mut Paging, t: &str, n| p.next(Some(t.to_string()), n, n, "list x");
        assert_eq!(next(&mut p, "a", 1000).unwrap().as_deref(), Some("a"));
        assert_eq!(next(&mut p, "b", 1000).unwrap().as_deref(), Some("b"));
        let e = next(&mut p, "a", 1000).unwrap_err().to_string();
        assert!(e.contains("\"a\" again"), "{e}");
        let mut p = Paging::default();
        assert_eq!(p.next(None, MAX_ENTRIES, 0, "list x").unwrap(), None);
        let mut p = Paging::default();
        for i in 0..MAX_ENTRIES / 1000 {
            next(&mut p, &i.to_string(), 1000).unwrap();
        }
        let e = next(&mut p, "last", 1000).unwrap_err().to_string();
        assert!(e.contains("more than"), "{e}");
        let mut p = Paging::default();
        assert!(p.next(None, 1, MAX_NAME_BYTES + 1, "list x").is_err());
    }

    #[test]
    fn listed_names_are_taken_exactly_or_left_out() {
        let name = |k: &str, d, e| entry_name(k, d, e, "p/");
        assert_eq!(
            name("p/x%41.b2frame", false, false).as_deref(),
            Some("x%41.b2frame")
        );
        assert_eq!(
            name("p/x%2541.b2frame", false, true).as_deref(),
            Some("x%41.b2frame")
        );
        assert_eq!(name("p/a%01b", false, true).as_deref(), Some("a\u{1}b"));
        assert_eq!(name("p/sub/", true, false).as_deref(), Some("sub"));
        assert_eq!(name("p/sub%2F", true, true).as_deref(), Some("sub"));
        for (k, d, e) in [
            ("p//", true, false),
            ("p/./", true, false),
            ("p/../", true, false),
            ("p/a%00b", false, true),
            ("q/x", false, false),
            ("p/", false, false),
            ("p/sub", true, false),
            ("p/%FF", false, true),
        ] {
            assert_eq!(name(k, d, e), None, "{k}");
        }
        assert_eq!(name(&format!("p/{}", "n".repeat(256)), false, false), None);
        assert_eq!(entry_name("/lead/", true, false, ""), None);
    }
}
