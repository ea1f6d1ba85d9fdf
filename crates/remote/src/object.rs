//! Positional reads of one remote object version, through the page cache.

use crate::error::FetchError;
use crate::fetch::Pin;
use crate::hints::Hints;
use crate::net::{block_on, runtime, Counters};
use crate::page_cache::{self, Page, Version, PAGE};
use crate::readahead::ReadAhead;
use crate::{Core, Object};
use blosc_decode::io::{First, Source, Span};
use blosc_decode::{Error, Result};
use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared};
use parking_lot::Mutex;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes of an object from a fetch: its first page and the data.
#[derive(Clone)]
pub struct Run {
    start_page: u64,
    data: Bytes,
}

/// A fetch under way, any number of readers may wait for.
pub type Pending = Shared<BoxFuture<'static, Result<Run, FetchError>>>;

/// Head and tail an open fetches: a frame's header and metalayers, and its
/// chunk offsets and trailer. Objects up to `HEAD + TAIL` come whole.
const HEAD: u64 = 128 << 10;
const TAIL: u64 = 256 << 10;

/// The most an open by name fetches of what its reader reads first.
pub(crate) const MAX_FIRST: u64 = 16 << 20;

/// Positional reads of one version of a remote object (the one
/// [`RemoteObject::object`] describes): the library's [`Source`].
pub struct RemoteObject {
    core: Arc<Core>,
    obj: Arc<Pin>,
    v: Version,
    ahead: Mutex<ReadAhead>,
    /// Bytes asked for by `will_need` so far (capped).
    hinted: AtomicU64,
    hints: Arc<Hints>,
}

impl RemoteObject {
    pub(crate) fn new(core: Arc<Core>, obj: Object) -> Self {
        // Without a strong ETag two versions of one length may look alike
        // (a weak ETag promises no identical bytes: nginx makes it of the
        // mtime in seconds and the length): such an object shares no
        // cached pages with other opens.
        let v = crate::shared_version(&obj).unwrap_or_else(|| {
            crate::version_of(&obj)
                ^ core
                    .next_run
                    .fetch_add(1, Ordering::Relaxed)
                    .rotate_left(32)
                ^ 0x5bd1_e995
        });
        let ahead = ReadAhead::new(core.opts.page_cache / 2);
        RemoteObject {
            core,
            obj: Arc::new(Pin {
                obj,
                learned: Default::default(),
            }),
            v,
            ahead: Mutex::new(ahead),
            hinted: AtomicU64::new(0),
            hints: Arc::default(),
        }
    }

    /// The object (and version) this reads.
    pub fn object(&self) -> &Object {
        &self.obj
    }

    /// Keep `data`, this version's bytes from `at` (a page boundary), as
    /// its pages: what the GET that found the object brought.
    pub(crate) fn keep(&self, at: u64, data: &Bytes) {
        self.core
            .pages
            .lock()
            .insert(self.v, at, data, self.obj.len);
    }

    /// Fetch the head and the tail concurrently (the whole object when
    /// small) so a container open costs at most 2 GETs. Called by the
    /// daemon before `open_source`.
    pub fn prefetch_open(&self) -> Result<()> {
        block_on(self.prefetch_open_async())
    }

    /// [`RemoteObject::prefetch_open`] without blocking.
    pub(crate) async fn prefetch_open_async(&self) -> Result<()> {
        let len = self.obj.len;
        let ranges: Vec<Range<u64>> = if len <= HEAD + TAIL {
            std::iter::once(0..len).collect()
        } else {
            // Page-aligned upwards: the tail a stat fetched covers it.
            let tail = (len - TAIL).div_ceil(PAGE) * PAGE;
            vec![0..HEAD, tail..len]
        };
        self.fetch_missing(&ranges).await
    }

    /// Fetch what a reader of a file opened by name reads `first`, in one
    /// GET if it is not cached (the GET that found the object by its key
    /// usually brought it).
    pub fn prefetch_first(&self, first: First) -> Result<()> {
        let len = self.obj.len;
        let r = match first {
            First::Head(n) => 0..n.min(MAX_FIRST).min(len),
            First::Tail(n) => len.saturating_sub(n.min(MAX_FIRST))..len,
        };
        block_on(self.fetch_missing(&[r]))
    }

    /// Fetch the pages of `ranges` that are neither cached nor being
    /// fetched, and wait for them.
    async fn fetch_missing(&self, ranges: &[Range<u64>]) -> Result<()> {
        let waits: Vec<Pending> = ranges
            .iter()
            .filter(|r| !r.is_empty())
            .filter_map(|r| self.start_missing(page_cache::pages(r)))
            .collect();
        for r in futures::future::join_all(waits).await {
            match r {
                Ok(_) | Err(FetchError::Cancelled) => {}
                Err(e) => return Err(self.failed(e)),
            }
        }
        Ok(())
    }

    fn failed(&self, e: FetchError) -> Error {
        Counters::add(&self.core.counters.errors, 1);
        e.into_decode()
    }

    /// Start fetching the pages of `pages` that are neither cached nor
    /// being fetched, as one run from the first such page to the last.
    fn start_missing(&self, pages: Range<u64>) -> Option<Pending> {
        let run = unclaimed(&self.core, self.v, pages)?;
        Some(start_run(&self.core, &self.obj, self.v, run))
    }

    /// The pages of `want`, each cached, fetched or waited for (`around`: a
    /// small read, rounded out to the read-around window when it misses).
    fn pages_of(&self, want: &Range<u64>, around: bool) -> Result<Vec<Option<Page>>> {
        let need = page_cache::pages(want);
        let window = if around {
            page_cache::pages(&page_cache::around(want, self.obj.len))
        } else {
            need.clone()
        };
        for _ in 0..4 {
            let mut have: Vec<Option<Page>> = vec![None; (need.end - need.start) as usize];
            let mut waits: Vec<Pending> = Vec::new();
            let mut missing: Vec<u64> = Vec::new();
            {
                let mut cache = self.core.pages.lock();
                let inflight = self.core.inflight.lock();
                for p in need.clone() {
                    if let Some(b) = cache.get(self.v, p) {
                        have[(p - need.start) as usize] = Some(b);
                    } else if let Some((_, w)) = inflight.get(&(self.v, p)) {
                        if !waits.iter().any(|x| x.ptr_eq(w)) {
                            waits.push(w.clone());
                        }
                    } else {
                        missing.push(p);
                    }
                }
            }
            if let (Some(&a), Some(&b)) = (missing.first(), missing.last()) {
                let run = self.widen(a..b + 1, &window);
                waits.push(start_run(&self.core, &self.obj, self.v, run));
            }
            let mut retry = false;
            for r in block_on(futures::future::join_all(waits)) {
                match r {
                    Ok(run) => page_cache::fill(&mut have, need.start, run.start_page, &run.data),
                    Err(FetchError::Cancelled) => retry = true,
                    Err(e) => return Err(self.failed(e)),
                }
            }
            if !retry && have.iter().all(Option::is_some) {
                return Ok(have);
            }
        }
        let url = self.core.fetcher.url(&self.obj.key);
        let m = format!("{url}: the fetch kept being cancelled");
        Err(self.failed(FetchError::failed(m)))
    }

    /// `run` extended within `window` over pages neither cached nor being
    /// fetched (the read-around).
    fn widen(&self, run: Range<u64>, window: &Range<u64>) -> Range<u64> {
        let cache = self.core.pages.lock();
        let inflight = self.core.inflight.lock();
        let free = |p: u64| !cache.contains(self.v, p) && !inflight.contains_key(&(self.v, p));
        let mut r = run;
        while r.start > window.start && free(r.start - 1) {
            r.start -= 1;
        }
        while r.end < window.end && free(r.end) {
            r.end += 1;
        }
        r
    }

    /// Tell the read-ahead about a read and start what it asks for.
    fn track(&self, offset: u64, len: u64) {
        let parts = self.ahead.lock().on_read(offset, len, self.obj.len);
        if !parts.is_empty() {
            log::trace!("{}: read-ahead {parts:?}", self.obj.key);
        }
        for part in parts {
            drop(self.start_missing(page_cache::pages(&part)));
        }
    }
}

/// `pages` of version `v` less the pages at its start and end that are
/// cached or being fetched; None when all are.
pub(crate) fn unclaimed(core: &Core, v: Version, pages: Range<u64>) -> Option<Range<u64>> {
    let cache = core.pages.lock();
    let inflight = core.inflight.lock();
    let free = |p: &u64| !cache.contains(v, *p) && !inflight.contains_key(&(v, *p));
    let first = pages.clone().find(free)?;
    let last = pages.clone().rev().find(free)?;
    Some(first..last + 1)
}

/// Start fetching `pages` of `obj` as one GET on the runtime, registered as
/// in flight until it ends: its pending result.
pub(crate) fn start_run(
    core: &Arc<Core>,
    obj: &Arc<Pin>,
    v: Version,
    pages: Range<u64>,
) -> Pending {
    let id = core.next_run.fetch_add(1, Ordering::Relaxed);
    let range = page_cache::bytes_of(&pages, obj.len);
    let (core2, obj2, range2) = (core.clone(), obj.clone(), range.clone());
    let mut inflight = core.inflight.lock();
    let task = runtime().spawn(async move {
        let _done = Unregister(core2.clone(), v, pages.clone(), id);
        let data = core2.fetcher.range(&obj2, range2.clone()).await?;
        core2.pages.lock().insert(v, range2.start, &data, obj2.len);
        Ok(Run {
            start_page: pages.start,
            data,
        })
    });
    let pending = async move { task.await.unwrap_or(Err(FetchError::Cancelled)) }
        .boxed()
        .shared();
    for p in page_cache::pages(&range) {
        inflight.insert((v, p), (id, pending.clone()));
    }
    pending
}

/// Removes a run's pages from the in-flight map when the run ends.
struct Unregister(Arc<Core>, Version, Range<u64>, u64);

impl Drop for Unregister {
    fn drop(&mut self) {
        let mut inflight = self.0.inflight.lock();
        for p in self.2.clone() {
            if inflight
                .get(&(self.1, p))
                .is_some_and(|(id, _)| *id == self.3)
            {
                inflight.remove(&(self.1, p));
            }
        }
    }
}

impl Source for RemoteObject {
    fn len(&self) -> u64 {
        self.obj.len
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let want = checked(offset, buf.len(), self.obj.len, &self.obj.key)?;
        self.track(offset, buf.len() as u64);
        let have = self.pages_of(&want, true)?;
        page_cache::copy_out(&have, want.start / PAGE, &want, buf);
        Ok(())
    }

    /// Lends the fetched bytes when one GET brought all of the span (a
    /// chunk fetched whole, a run of blocks), else copies them out.
    fn read_span<'a>(
        &self,
        offset: u64,
        len: usize,
        _access: blosc_decode::io::Access,
        scratch: &'a mut Vec<u8>,
    ) -> Result<(Span<'a>, bool)> {
        let want = checked(offset, len, self.obj.len, &self.obj.key)?;
        self.track(offset, len as u64);
        let have = self.pages_of(&want, false)?;
        if let Some(lent) = page_cache::joined(&have, want.start / PAGE, &want) {
            return Ok((Span::Held(Box::new(lent)), false));
        }
        if scratch.len() < len {
            scratch.resize(len, 0);
        }
        page_cache::copy_out(&have, want.start / PAGE, &want, &mut scratch[..len]);
        Ok((Span::Read(&scratch[..len]), false))
    }

    fn will_read(&self, offset: u64, len: u64) {
        if let Ok(want) = checked(offset, len as usize, self.obj.len, &self.obj.key) {
            drop(self.start_missing(page_cache::pages(&want)));
        }
    }

    fn joins_reads(&self) -> bool {
        true
    }

    fn will_need(&self, offset: u64, len: u64) {
        let Ok(want) = checked(offset, len as usize, self.obj.len, &self.obj.key) else {
            return;
        };
        let cap = self.core.opts.page_cache / 2;
        let pages = page_cache::pages(&want);
        let bytes = (pages.end - pages.start) * PAGE;
        if self.hinted.fetch_add(bytes, Ordering::Relaxed) + bytes > cap {
            return;
        }
        if unclaimed(&self.core, self.v, pages).is_some() {
            self.hints.push(&self.core, &self.obj, self.v, want);
        }
    }
}

/// `offset..offset + len`, if inside an object of `size` bytes.
fn checked(offset: u64, len: usize, size: u64, key: &str) -> Result<Range<u64>> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= size => Ok(offset..end),
        _ => Err(Error::truncated(format!(
            "{key}: needs {len} bytes at {offset} but the object has {size}"
        ))),
    }
}
