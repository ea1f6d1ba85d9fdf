//! Listings and stats of each kind of location.

use crate::connect::{join, Backend};
use crate::fetch::{classify, FetchError};
use crate::net::{block_on, chain, io_err};
use crate::parse::{self, Tree};
use crate::requests::{crate_list, manifest, xml_list, Paging};
use crate::spans::PAGE;
use crate::{version_of, Core, Entry, Listing, Object};
use futures::StreamExt;
use object_store::list::{PaginatedListOptions, PaginatedListResult, PaginatedListStore};
use object_store::path::Path;
use object_store::{GetOptions, GetRange};
use std::io;

type Result<T, E = io::Error> = std::result::Result<T, E>;
use std::sync::Arc;

/// Bytes of an object's tail a stat fetches (kept for the open after it).
const TAIL: u64 = 256 << 10;
/// Stats in flight for a listing that lacks sizes.
const PROBES: usize = 16;

pub fn list(core: &Arc<Core>, dir: &str) -> Result<Listing> {
    if !dir.is_empty() && !parse::clean_path(dir) {
        return Err(io_err(
            libc::EINVAL,
            format!("{}: bad directory `{dir}`", core.loc),
        ));
    }
    let mut l = match &core.backend {
        Backend::S3 { prefix, pages } => block_on(s3_list(core, pages, &join(prefix, dir), dir))?,
        Backend::Http { leaf, .. } if !leaf.is_empty() => {
            return Err(io_err(
                libc::ENOTDIR,
                format!("{}: an object, not a directory", core.loc),
            ))
        }
        Backend::Http { .. } if core.opts.manifest.is_some() => {
            let tree = manifest(core)?;
            from_tree(core, &tree, dir, dir)?
        }
        Backend::Http { base, .. } => block_on(xml_list(core, base, dir))?,
        Backend::Caterva2 { url, root } => {
            let names = block_on(crate_list(core, url, &join(root, dir)))?;
            let tree = Tree::new(names.into_iter().map(|n| (n, None)));
            from_tree(core, &tree, "", dir)?
        }
    };
    l.objects.iter_mut().for_each(|o| o.key = join(dir, &o.key));
    Ok(l)
}

pub fn stat(core: &Arc<Core>, key: &str) -> Result<Entry> {
    if !key.is_empty() && !parse::clean_path(key) {
        return Err(io_err(
            libc::ENOENT,
            format!("{}: bad key `{key}`", core.loc),
        ));
    }
    match &core.backend {
        Backend::S3 { prefix, .. } if join(prefix, key).is_empty() => return Ok(Entry::Dir),
        Backend::Http { leaf, .. } if key.is_empty() && leaf.is_empty() => return Ok(Entry::Dir),
        Backend::Http { .. } if core.opts.manifest.is_some() => {
            let tree = manifest(core)?;
            return match tree.file(key) {
                Some(Some(len)) => Ok(Entry::Object(Object {
                    key: key.into(),
                    len,
                    etag: None,
                    mtime: None,
                })),
                Some(None) => block_on(probe(core, key))
                    .map(Entry::Object)
                    .map_err(FetchError::into_io),
                None if tree.level(key).is_some() => Ok(Entry::Dir),
                None => Err(io_err(
                    libc::ENOENT,
                    format!("{}: no `{key}` in the manifest", core.loc),
                )),
            };
        }
        _ => {}
    }
    let err: FetchError = match block_on(probe(core, key)) {
        Ok(o) => return Ok(Entry::Object(o)),
        Err(e) => e,
    };
    // Not an object: a directory if anything is listed under it.
    let dir = match &core.backend {
        // Its listing without the stats of what is in it.
        Backend::Caterva2 { url, root } => {
            block_on(crate_list(core, url, &join(root, key))).is_ok_and(|names| !names.is_empty())
        }
        _ => list(core, key).is_ok_and(|l| !l.dirs.is_empty() || !l.objects.is_empty()),
    };
    match dir {
        true => Ok(Entry::Dir),
        false => match err {
            FetchError::Gone(m) => Err(io_err(libc::ENOENT, m)),
            e => Err(e.into_io()),
        },
    }
}

/// The object `key` (any version): one GET of its tail, kept in the span
/// cache.
async fn probe(core: &Arc<Core>, key: &str) -> Result<Object, FetchError> {
    let stub = Object {
        key: key.to_string(),
        len: 0,
        etag: None,
        mtime: None,
    };
    let f = &core.fetcher;
    let what = format!("GET {}", f.url(key));
    let named = |e: FetchError| match e {
        FetchError::Gone(m) => FetchError::Gone(format!("{what}: {m}")),
        FetchError::Changed(m) => FetchError::Changed(format!("{what}: {m}")),
        FetchError::Io(n, m) => FetchError::Io(n, format!("{what}: {m}")),
        e => e,
    };
    let ans = match f
        .get(&stub, GetRange::Suffix(TAIL), None)
        .await
        .map_err(named)
    {
        Err(e @ (FetchError::Gone(_) | FetchError::Changed(_))) => return Err(e),
        // A server that refuses suffix ranges (416, or a 200 answer); an
        // empty object (416).
        Err(FetchError::Io(_, m)) if m.contains("416") || m.contains("non-partial") => match f
            .get(&stub, GetRange::Bounded(0..TAIL), None)
            .await
            .map_err(named)
        {
            Ok(a) => a,
            Err(FetchError::Io(..)) => return empty(core, key).await,
            Err(e) => return Err(e),
        },
        Err(e) => return Err(e),
        Ok(a) => a,
    };
    let mtime = ans.mtime.filter(|t| *t != std::time::UNIX_EPOCH);
    let obj = Object {
        key: key.to_string(),
        len: ans.len,
        etag: ans.etag,
        mtime,
    };
    // Keep the whole pages of the tail (or head) it brought.
    let start = if ans.data.len() as u64 == obj.len || ans.len <= TAIL {
        0
    } else {
        obj.len - ans.data.len() as u64
    };
    let (start, skip) = if start == 0 {
        (0, 0)
    } else {
        (
            start.div_ceil(PAGE) * PAGE,
            start.div_ceil(PAGE) * PAGE - start,
        )
    };
    if (skip as usize) < ans.data.len() {
        let data = ans.data.slice(skip as usize..);
        core.spans
            .lock()
            .insert(version_of(&obj), start, &data, obj.len);
    }
    Ok(obj)
}

/// An object no range can be asked of: an empty one (the answer's headers
/// say; the body is not read).
async fn empty(core: &Arc<Core>, key: &str) -> Result<Object, FetchError> {
    let what = format!("GET {}", core.fetcher.url(key));
    let path = (core.fetcher.path_of)(key);
    let res = core
        .fetcher
        .store
        .get_opts(&path, GetOptions::default())
        .await
        .map_err(classify);
    let res = res.map_err(|e| match e {
        FetchError::Io(n, m) => FetchError::Io(n, format!("{what}: {m}")),
        e => e,
    })?;
    if res.meta.size != 0 {
        return Err(FetchError::Io(
            libc::EIO,
            format!("{what}: the server answers no byte range"),
        ));
    }
    Ok(Object {
        key: key.to_string(),
        len: 0,
        etag: res.meta.e_tag,
        mtime: None,
    })
}

async fn s3_list(
    core: &Arc<Core>,
    pages: &Arc<dyn PaginatedListStore>,
    full: &str,
    dir: &str,
) -> Result<Listing> {
    let what = format!("list {}/{dir}", core.loc);
    let prefix = s3_prefix(full, "");
    let mut l = Listing::default();
    let mut paging = Paging::default();
    let mut token = None;
    loop {
        let page = s3_page(pages, prefix.as_deref(), token, &what).await?;
        let n = page.result.common_prefixes.len() + page.result.objects.len();
        add_page(&mut l, page.result);
        token = paging.next(page.page_token, n, &what)?;
        if token.is_none() {
            break;
        }
    }
    if !dir.is_empty() && l.dirs.is_empty() && l.objects.is_empty() {
        return Err(io_err(
            libc::ENOENT,
            format!("{}/{dir}: nothing there", core.loc),
        ));
    }
    Ok(l)
}

/// The entries of `dir` whose names start with `start` (no `/` in it;
/// empty: all of them), if one request can tell: an S3 store, and one page
/// of such names (`None` otherwise: list `dir` whole).
pub fn list_start(core: &Arc<Core>, dir: &str, start: &str) -> Result<Option<Listing>> {
    let Backend::S3 { prefix, pages } = &core.backend else {
        return Ok(None);
    };
    if start.contains('/') || !dir.is_empty() && !parse::clean_path(dir) {
        return Ok(None);
    }
    let what = format!("list {}/{dir}/{start}*", core.loc);
    let keys = s3_prefix(&join(prefix, dir), start);
    let page = block_on(s3_page(pages, keys.as_deref(), None, &what))?;
    if page.page_token.is_some() {
        return Ok(None);
    }
    let mut l = Listing::default();
    add_page(&mut l, page.result);
    l.objects.iter_mut().for_each(|o| o.key = join(dir, &o.key));
    Ok(Some(l))
}

/// The key prefix of the names starting with `start` in directory `full`
/// (the whole key under the bucket), as object_store names keys: `full/`
/// for all of them, `None` for the whole bucket.
fn s3_prefix(full: &str, start: &str) -> Option<String> {
    match (full.is_empty(), start.is_empty()) {
        (true, true) => None,
        (false, true) => Some(format!("{}/", Path::from(full).as_ref())),
        (_, false) => Some(Path::from(join(full, start)).as_ref().to_string()),
    }
}

/// One page of an S3 listing by `/` of the keys starting with `prefix`.
async fn s3_page(
    pages: &Arc<dyn PaginatedListStore>,
    prefix: Option<&str>,
    token: Option<String>,
    what: &str,
) -> Result<PaginatedListResult> {
    let opts = PaginatedListOptions {
        delimiter: Some("/".into()),
        page_token: token,
        ..Default::default()
    };
    pages
        .list_paginated(prefix, opts)
        .await
        .map_err(|e| io_err(libc::EIO, format!("{what}: {}", chain(&e))))
}

/// The directories and objects of a page, by their names.
fn add_page(l: &mut Listing, r: object_store::ListResult) {
    for p in r.common_prefixes {
        l.dirs.push(decoded(p.filename().unwrap_or_default()));
    }
    for m in r.objects {
        let name = decoded(m.location.filename().unwrap_or_default());
        let mtime = Some(m.last_modified.into());
        l.objects.push(Object {
            key: name,
            len: m.size,
            etag: m.e_tag,
            mtime,
        });
    }
}

fn decoded(part: &str) -> String {
    percent_encoding::percent_decode_str(part)
        .decode_utf8_lossy()
        .into_owned()
}

/// One level of `tree`, sizes it lacks probed concurrently (objects that
/// cannot be read by range are left out).
fn from_tree(core: &Arc<Core>, tree: &Tree, dir: &str, key_dir: &str) -> Result<Listing> {
    let level = tree.level(dir).ok_or_else(|| {
        io_err(
            libc::ENOENT,
            format!("{}/{dir}: no such directory", core.loc),
        )
    })?;
    let mut l = Listing {
        dirs: level.dirs.iter().cloned().collect(),
        objects: Vec::new(),
    };
    let mut unknown = Vec::new();
    for (name, size) in &level.files {
        match size {
            Some(len) => l.objects.push(Object {
                key: name.clone(),
                len: *len,
                etag: None,
                mtime: None,
            }),
            None => unknown.push(name.clone()),
        }
    }
    let probed: Vec<(String, Result<Object, FetchError>)> = block_on(
        futures::stream::iter(unknown)
            .map(|name| async move {
                let r = probe(core, &join(key_dir, &name)).await;
                (name, r)
            })
            .buffered(PROBES)
            .collect(),
    );
    for (name, r) in probed {
        match r {
            Ok(o) => l.objects.push(Object { key: name, ..o }),
            Err(e) => log::info!("{}: leaving `{name}` out of the listing: {e:?}", core.loc),
        }
    }
    l.objects.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(l)
}
