//! Listings and stats of each kind of location.

use crate::answer::Want;
use crate::connect::{join, Backend};
use crate::error::{self, invalid, not_dir, not_found, FetchError};
use crate::names::Skipped;
use crate::net::block_on;
use crate::object::MAX_FIRST;
use crate::page_cache::PAGE;
use crate::parse::{self, Tree};
use crate::requests::{crate_list, manifest, xml_list, xml_pages, Keys};
use crate::{Core, Entry, Listing, Object, RemoteObject};
use blosc_decode::io::First;
use bytes::Bytes;
use futures::StreamExt;
use std::io;

type Result<T, E = io::Error> = std::result::Result<T, E>;
use std::sync::Arc;

/// Bytes of an object's tail a stat fetches (kept for the open after it).
const TAIL: u64 = 256 << 10;

/// Stats in flight for a listing that lacks sizes.
const PROBES: usize = 16;

pub fn list(core: &Arc<Core>, dir: &str) -> Result<Listing> {
    if !dir.is_empty() && !parse::showable_path(dir) {
        return Err(invalid(format!("{}: bad directory `{dir}`", core.loc)));
    }
    let mut l = match &core.backend {
        Backend::S3 { prefix, bucket } => {
            let keys = Keys::dir(&join(prefix, dir));
            let url = format!("{}/", bucket.url);
            match block_on(xml_pages(core, &url, &keys, false)) {
                // The location itself holding nothing is an empty
                // directory, as `ls` of an empty prefix is.
                Err(e) if dir.is_empty() && error::is_not_found(&e) => Listing::default(),
                r => r?.expect("a whole listing"),
            }
        }
        Backend::Http { leaf, .. } if !leaf.is_empty() => {
            return Err(not_dir(format!("{}: an object, not a directory", core.loc)))
        }
        Backend::Http { .. } if core.opts.manifest.is_some() => {
            let tree = manifest(core)?;
            from_tree(core, &tree, dir, dir)?
        }
        Backend::Http { base, .. } => block_on(xml_list(core, base, dir))?,
        Backend::Caterva2 { url, root } => {
            let (names, skipped) = block_on(crate_list(core, url, &join(root, dir)))?;
            skipped.log(&format!("list {}/{dir}", core.loc));
            let tree = Tree::new(names.into_iter().map(|n| (n, None)));
            from_tree(core, &tree, "", dir)?
        }
    };
    dirs_win(&mut l).log(&format!("list {}/{dir}", core.loc));
    l.objects.iter_mut().for_each(|o| o.key = join(dir, &o.key));
    Ok(l)
}

/// An object and a directory of the same name: the directory is shown,
/// the object left out (what was left out returned).
fn dirs_win(l: &mut Listing) -> Skipped {
    let mut skipped = Skipped::default();
    if l.dirs.is_empty() {
        return skipped;
    }
    let dirs: std::collections::HashSet<&str> = l.dirs.iter().map(String::as_str).collect();
    l.objects.retain(|o| {
        let keep = !dirs.contains(o.key.as_str());
        if !keep {
            skipped.skip(&o.key);
        }
        keep
    });
    skipped
}

pub fn stat(core: &Arc<Core>, key: &str) -> Result<Entry> {
    if !key.is_empty() && !parse::showable_path(key) {
        return Err(not_found(format!("{}: bad key `{key}`", core.loc)));
    }
    match &core.backend {
        Backend::S3 { prefix, .. } if join(prefix, key).is_empty() => return Ok(Entry::Dir),
        Backend::Http { leaf, .. } if key.is_empty() && leaf.is_empty() => return Ok(Entry::Dir),
        Backend::Http { .. } if core.opts.manifest.is_some() => {
            let tree = manifest(core)?;
            // A path both a file and a directory: the directory, as listed.
            if tree.level(key).is_some() {
                return Ok(Entry::Dir);
            }
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
                None => Err(not_found(format!(
                    "{}: no `{key}` in the manifest",
                    core.loc
                ))),
            };
        }
        _ => {}
    }
    let err: FetchError = match block_on(probe(core, key)) {
        Ok(_) if prefix_has_entries(core, key) => return Ok(Entry::Dir),
        Ok(o) => return Ok(Entry::Object(o)),
        // A server that does not answer in time would not answer a
        // listing either.
        Err(e) if e.is_timeout() => return Err(e.into_io()),
        Err(e) => e,
    };
    // Not an object: a directory if anything is listed under it.
    let dir = match &core.backend {
        // Its listing without the stats of what is in it.
        Backend::Caterva2 { url, root } => block_on(crate_list(core, url, &join(root, key)))
            .is_ok_and(|(names, _)| !names.is_empty()),
        _ => list(core, key).is_ok_and(|l| !l.dirs.is_empty() || !l.objects.is_empty()),
    };
    match dir {
        true => Ok(Entry::Dir),
        false => match err {
            FetchError::Gone(m) => Err(not_found(m)),
            e => Err(e.into_io()),
        },
    }
}

/// Is an S3 object `key` also a prefix `key/` with entries under it (the
/// listings show the directory, as [`dirs_win`] says)? One request, one
/// page; a listing that fails (a store that lets the object be read, not
/// listed) says no.
fn prefix_has_entries(core: &Arc<Core>, key: &str) -> bool {
    let Backend::S3 { prefix, bucket } = &core.backend else {
        return false;
    };
    let keys = Keys::dir(&join(prefix, key));
    let url = format!("{}/", bucket.url);
    match block_on(xml_pages(core, &url, &keys, true)) {
        Ok(Some(l)) => !l.dirs.is_empty() || !l.objects.is_empty(),
        Ok(None) => true,
        Err(e) => {
            log::debug!("{}: {key}/ not listed: {e}", core.loc);
            false
        }
    }
}

/// The object at `key` by a GET of what its reader reads `first`, without
/// a listing: a file whose key is known (a Zarr chunk) costs no listing of
/// its directory. Returned opened, the bytes that GET brought kept for its
/// reads (under the version it pins, shared with other opens or not).
/// `None` if there is none (404), or, by a manifest, if the manifest does
/// not hold it.
pub fn open_object(core: &Arc<Core>, key: &str, first: First) -> Result<Option<RemoteObject>> {
    if key.is_empty() || !parse::showable_path(key) {
        return Ok(None);
    }
    if let Backend::Http { .. } = &core.backend {
        if core.opts.manifest.is_some() {
            return match stat(core, key) {
                Ok(Entry::Object(o)) => Ok(Some(RemoteObject::new(core.clone(), o))),
                Ok(Entry::Dir) => Ok(None),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            };
        }
    }
    match block_on(get_first(core, key, first)) {
        Ok((o, at, data)) => {
            let src = RemoteObject::new(core.clone(), o);
            src.keep(at, &data);
            Ok(Some(src))
        }
        Err(FetchError::Gone(_)) => Ok(None),
        Err(e) => Err(e.into_io()),
    }
}

/// The object at `key` by a GET of its tail (a container's trailer).
async fn probe(core: &Arc<Core>, key: &str) -> Result<Object, FetchError> {
    probe_first(core, key, First::Tail(TAIL)).await
}

/// The object at `key` by a GET of its `first` bytes (at most
/// [`MAX_FIRST`]), which are kept in the page cache if another open may
/// share them.
async fn probe_first(core: &Arc<Core>, key: &str, first: First) -> Result<Object, FetchError> {
    let (obj, at, data) = get_first(core, key, first).await?;
    if let Some(v) = crate::shared_version(&obj) {
        core.pages.lock().insert(v, at, &data, obj.len);
    }
    Ok(obj)
}

/// The object at `key` by a GET of its `first` bytes (at most
/// [`MAX_FIRST`]), and those of them from a page boundary on: where they
/// start, and the bytes.
async fn get_first(
    core: &Arc<Core>,
    key: &str,
    first: First,
) -> Result<(Object, u64, Bytes), FetchError> {
    let f = &core.fetcher;
    let what = format!("GET {}", f.url(key));
    let get = |want| async { f.get(key, want, None).await.map_err(|e| e.named(&what)) };
    let head = |n: u64| Want::Range(0..n.clamp(PAGE, MAX_FIRST));
    // Where the answer's data starts: 0 but for a suffix (an object
    // shorter than the suffix comes whole).
    let (ans, suffix) = match first {
        First::Tail(n) => match get(Want::Suffix(n.clamp(PAGE, MAX_FIRST))).await {
            // A server that refuses suffix ranges (416, or a 200 answer);
            // an empty object (416).
            Err(FetchError::NoRange(_)) => (head_or_empty(&get, head(n)).await?, false),
            a => (a?, true),
        },
        First::Head(n) => (head_or_empty(&get, head(n)).await?, false),
    };
    let mtime = ans.mtime.filter(|t| *t != std::time::UNIX_EPOCH);
    let obj = Object {
        key: key.to_string(),
        len: ans.len,
        etag: ans.etag,
        mtime,
    };
    // The whole pages it brought.
    let start = match suffix {
        true => obj.len.saturating_sub(ans.data.len() as u64),
        false => 0,
    };
    let aligned = start.div_ceil(PAGE) * PAGE;
    let skip = ((aligned - start) as usize).min(ans.data.len());
    Ok((obj, aligned, ans.data.slice(skip..)))
}

/// The answer to a GET of `want` (a range from 0), or to a GET of the
/// whole object if it is empty or the server refuses ranges.
async fn head_or_empty<F, G>(get: &F, want: Want) -> Result<crate::fetch::Answer, FetchError>
where
    F: Fn(Want) -> G,
    G: std::future::Future<Output = Result<crate::fetch::Answer, FetchError>>,
{
    match get(want).await {
        Err(FetchError::NoRange(_)) => get(Want::Empty).await,
        a => a,
    }
}

/// The entries of `dir` whose names start with `start` (no `/` in it;
/// empty: all of them), if one request can tell: an S3 store, and one page
/// of such names (`None` otherwise: list `dir` whole).
pub fn list_start(core: &Arc<Core>, dir: &str, start: &str) -> Result<Option<Listing>> {
    let Backend::S3 { prefix, bucket } = &core.backend else {
        return Ok(None);
    };
    if start.contains('/') || !dir.is_empty() && !parse::showable_path(dir) {
        return Ok(None);
    }
    let keys = Keys::start(&join(prefix, dir), start);
    let url = format!("{}/", bucket.url);
    let Some(mut l) = block_on(xml_pages(core, &url, &keys, true))? else {
        return Ok(None);
    };
    let skipped = dirs_win(&mut l);
    if start.is_empty() {
        skipped.log(&format!("list {}/{dir}", core.loc));
    }
    l.objects.iter_mut().for_each(|o| o.key = join(dir, &o.key));
    Ok(Some(l))
}

/// One level of `tree`, sizes it lacks probed concurrently (objects that
/// cannot be read by range are left out).
fn from_tree(core: &Arc<Core>, tree: &Tree, dir: &str, key_dir: &str) -> Result<Listing> {
    let level = tree
        .level(dir)
        .ok_or_else(|| not_found(format!("{}/{dir}: no such directory", core.loc)))?;
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
