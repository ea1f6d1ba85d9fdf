//! Listing requests object_store has no verb for: a manifest, an S3-style
//! XML listing over plain HTTP, Caterva2's `/api/list`.

use crate::connect::{join, Backend};
use crate::net::{block_on, chain, io_err, is_final, Counters};
use crate::parse::{self, Tree};
use crate::{Core, Listing, Object};
use std::io;
use std::sync::Arc;

type Result<T, E = io::Error> = std::result::Result<T, E>;

/// One GET of `url` by the listing client: status and body (retried
/// after a 5xx or a failure, within the read budget).
pub async fn get(core: &Core, url: &str) -> Result<(u16, bytes::Bytes)> {
    let budget = core.fetcher.budget();
    match tokio::time::timeout(budget, get_retried(core, url)).await {
        Ok(r) => r,
        Err(_) => Err(io_err(
            libc::ETIMEDOUT,
            format!("GET {url}: no answer in {budget:?}"),
        )),
    }
}

async fn get_retried(core: &Core, url: &str) -> Result<(u16, bytes::Bytes)> {
    let mut attempt = 0;
    loop {
        let req = http::Request::get(url)
            .body(object_store::client::HttpRequestBody::empty())
            .map_err(|e| io_err(libc::EINVAL, format!("GET {url}: {e}")))?;
        let once = async {
            let res = core.client.execute(req).await?;
            let status = res.status().as_u16();
            Ok::<_, object_store::client::HttpError>((status, res.into_body().bytes().await?))
        };
        let e = match tokio::time::timeout(core.opts.timeout, once).await {
            Ok(Ok((s, b))) if s < 500 => return Ok((s, b)),
            Ok(Ok((s, _))) => format!("{s}"),
            // Read no further (or follow no redirect), and not again.
            Ok(Err(e)) if is_final(&e) => {
                return Err(io_err(libc::EIO, format!("GET {url}: {}", chain(&e))))
            }
            Ok(Err(e)) => chain(&e),
            Err(_) => format!("no answer in {:?}", core.opts.timeout),
        };
        if attempt >= core.opts.retries {
            return Err(io_err(libc::EIO, format!("GET {url}: {e}")));
        }
        attempt += 1;
        Counters::add(&core.counters.retries, 1);
        tokio::time::sleep(std::time::Duration::from_millis(100 << attempt.min(4))).await;
    }
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
    let url = format!("{base}/{name}");
    let (status, body) = block_on(get(core, &url))?;
    if status != 200 {
        return Err(io_err(libc::EIO, format!("GET {url}: {status}")));
    }
    let text =
        std::str::from_utf8(&body).map_err(|_| io_err(libc::EIO, format!("{url}: not UTF-8")))?;
    let items = parse::manifest(text).map_err(|e| io_err(libc::EIO, format!("{url}: {e}")))?;
    let t = Arc::new(Tree::new(items));
    *manifest.lock() = Some(t.clone());
    Ok(t)
}

/// Caterva2's `/api/list/<root/dir>`: paths under it, all levels.
pub async fn crate_list(core: &Core, url: &str, path: &str) -> Result<Vec<String>> {
    let u = format!("{url}/api/list/{path}");
    let (status, body) = get(core, &u).await?;
    match status {
        200 => parse::caterva2_list(&body).map_err(|e| io_err(libc::EIO, format!("GET {u}: {e}"))),
        404 => Err(io_err(libc::ENOENT, format!("GET {u}: 404"))),
        401 | 403 => Err(io_err(libc::EACCES, format!("GET {u}: {status}"))),
        s => Err(io_err(libc::EIO, format!("GET {u}: {s}"))),
    }
}

/// The most entries one directory's listing may have (a listing is held
/// whole, about 700 bytes an entry in the daemon).
pub const MAX_ENTRIES: usize = 1 << 22;

/// The pages of one listing: a listing ends, even from a server whose
/// continuation tokens would lead on for ever.
#[derive(Default)]
pub struct Paging {
    seen: std::collections::HashSet<String>,
    entries: usize,
}

impl Paging {
    /// After a page of `entries` entries whose next-page token is `token`:
    /// the token to ask with next, `None` at the end; an error past
    /// [`MAX_ENTRIES`] or at a token seen before (`what` names the listing).
    pub fn next(
        &mut self,
        token: Option<String>,
        entries: usize,
        what: &str,
    ) -> Result<Option<String>> {
        self.entries += entries;
        if self.entries > MAX_ENTRIES {
            let m = format!(
                "{what}: more than {MAX_ENTRIES} entries, more than one directory may hold"
            );
            return Err(io_err(libc::EIO, m));
        }
        match token {
            Some(t) if !self.seen.insert(t.clone()) => {
                let m = format!("{what}: the server gave the continuation token {t:?} again (its listing would not end)");
                Err(io_err(libc::EIO, m))
            }
            t => Ok(t),
        }
    }
}

/// An S3-style XML listing of `dir` under `base`: at `base` itself, else
/// at a shorter URL with the rest of the path as the prefix.
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
        let prefix = join(&segs[k..].join("/"), dir);
        match xml_pages(core, &list_url, &prefix).await {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io_err(libc::EIO, format!("{base}: no listing"))))
}

async fn xml_pages(core: &Core, list_url: &str, prefix: &str) -> Result<Listing> {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    let p = if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    };
    let mut l = Listing::default();
    let mut paging = Paging::default();
    let mut token: Option<String> = None;
    loop {
        let mut u = format!(
            "{list_url}/?list-type=2&delimiter=%2F&prefix={}",
            utf8_percent_encode(&p, NON_ALPHANUMERIC)
        );
        if let Some(t) = &token {
            u.push_str(&format!(
                "&continuation-token={}",
                utf8_percent_encode(t, NON_ALPHANUMERIC)
            ));
        }
        let (status, body) = get(core, &u).await?;
        if status != 200 {
            return Err(io_err(libc::EIO, format!("GET {u}: {status}")));
        }
        let text = String::from_utf8_lossy(&body);
        let page =
            parse::xml_listing(&text).map_err(|e| io_err(libc::EIO, format!("GET {u}: {e}")))?;
        let n = page.prefixes.len() + page.objects.len();
        for d in page.prefixes {
            if let Some(name) = d.strip_prefix(&p).map(|s| s.trim_end_matches('/')) {
                if parse::clean_path(name) {
                    l.dirs.push(name.to_string());
                }
            }
        }
        for (k, len, etag, mtime) in page.objects {
            if let Some(name) = k
                .strip_prefix(&p)
                .filter(|n| parse::clean_path(n) && !n.contains('/'))
            {
                l.objects.push(Object {
                    key: name.to_string(),
                    len,
                    etag,
                    mtime,
                });
            }
        }
        token = paging.next(page.next, n, &format!("list {list_url}/{p}"))?;
        if token.is_none() {
            break;
        }
    }
    if !prefix.is_empty() && l.dirs.is_empty() && l.objects.is_empty() {
        return Err(io_err(
            libc::ENOENT,
            format!("{list_url}: nothing under {p}"),
        ));
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::{Paging, MAX_ENTRIES};

    #[test]
    fn a_listing_ends_at_a_token_seen_before_or_past_the_entry_bound() {
        let mut p = Paging::default();
        let next = |p: &mut Paging, t: &str, n| p.next(Some(t.to_string()), n, "list x");
        assert_eq!(next(&mut p, "a", 1000).unwrap().as_deref(), Some("a"));
        assert_eq!(next(&mut p, "b", 1000).unwrap().as_deref(), Some("b"));
        let e = next(&mut p, "a", 1000).unwrap_err().to_string();
        assert!(e.contains("\"a\" again"), "{e}");
        let mut p = Paging::default();
        assert_eq!(p.next(None, MAX_ENTRIES, "list x").unwrap(), None);
        let mut p = Paging::default();
        for i in 0..MAX_ENTRIES / 1000 {
            next(&mut p, &i.to_string(), 1000).unwrap();
        }
        let e = next(&mut p, "last", 1000).unwrap_err().to_string();
        assert!(e.contains("more than"), "{e}");
    }
}
