//! The page cache: compressed bytes of remote objects, in 4 KiB pages keyed
//! by (object version, page number), least recently used first out, bounded
//! in bytes and shared by every object of a [`crate::Remote`].
//!
//! Pages are parts of the buffers the GETs returned (no copy); a page holds
//! [`PAGE`] bytes except an object's last one. A read whose pages are
//! consecutive parts of one such buffer is lent that buffer's bytes
//! ([`joined`]) rather than copied out of them.

use bytes::Bytes;
use lru::LruCache;
use std::ops::Range;

/// Granularity of the cache.
pub const PAGE: u64 = 4 << 10;
/// Small reads are rounded out to this alignment (read-around), so a chunk
/// header and the block starts after it cost one GET.
pub const AROUND: u64 = 64 << 10;

/// Which version of which object: a hash of (key, etag, length, mtime).
pub type Version = u64;

/// The pages `range` touches.
pub fn pages(range: &Range<u64>) -> Range<u64> {
    if range.is_empty() {
        return range.start / PAGE..range.start / PAGE;
    }
    range.start / PAGE..range.end.div_ceil(PAGE)
}

/// The byte range of `pages` in an object of `len` bytes.
pub fn bytes_of(pages: &Range<u64>, len: u64) -> Range<u64> {
    (pages.start * PAGE).min(len)..(pages.end * PAGE).min(len)
}

/// `range` rounded out to [`AROUND`] alignment (within `len`) when it is
/// smaller than that: the read-around of a small read.
pub fn around(range: &Range<u64>, len: u64) -> Range<u64> {
    if range.end - range.start >= AROUND {
        return range.clone();
    }
    let start = range.start / AROUND * AROUND;
    let end = range.end.div_ceil(AROUND).saturating_mul(AROUND).min(len);
    start..end.max(range.end)
}

/// A cached page: bytes `at..at + len` of `run`, the buffer one GET
/// returned (which stays allocated while any of its pages is kept, as a
/// slice of it would keep it).
#[derive(Clone)]
pub struct Page {
    run: Bytes,
    at: usize,
    len: usize,
}

impl Page {
    /// The page's `at..` part of `run`, at most [`PAGE`] bytes.
    fn of(run: &Bytes, at: usize) -> Page {
        Page {
            run: run.clone(),
            at,
            len: (run.len() - at).min(PAGE as usize),
        }
    }

    /// The page's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.run[self.at..self.at + self.len]
    }

    /// Does `next` follow this page in the same buffer?
    fn followed_by(&self, next: &Page) -> bool {
        self.run.as_ptr() == next.run.as_ptr()
            && self.run.len() == next.run.len()
            && self.at + self.len == next.at
    }
}

/// A byte-bounded LRU of pages.
pub struct PageCache {
    pages: LruCache<(Version, u64), Page>,
    bytes: u64,
    cap: u64,
}

impl PageCache {
    /// An empty cache holding at most `cap` bytes.
    pub fn new(cap: u64) -> Self {
        PageCache {
            pages: LruCache::unbounded(),
            bytes: 0,
            cap,
        }
    }

    /// Bytes held.
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The page `page` of `v`, if held (and mark it used).
    pub fn get(&mut self, v: Version, page: u64) -> Option<Page> {
        self.pages.get(&(v, page)).cloned()
    }

    /// Is the page held? (Does not mark it used.)
    pub fn contains(&self, v: Version, page: u64) -> bool {
        self.pages.contains(&(v, page))
    }

    /// Keep `data`, the bytes of `v` from `start` (a multiple of [`PAGE`]),
    /// as pages; a partial last page is kept only if it ends the object
    /// (`start + data.len() == len`). Evicts the least recently used pages
    /// beyond the cap.
    pub fn insert(&mut self, v: Version, start: u64, data: &Bytes, len: u64) {
        debug_assert_eq!(start % PAGE, 0);
        let mut at = 0usize;
        while at < data.len() {
            let end = (at + PAGE as usize).min(data.len());
            let is_last = start + end as u64 == len;
            if end - at < PAGE as usize && !is_last {
                break;
            }
            let page = (start + at as u64) / PAGE;
            self.bytes += (end - at) as u64;
            if let Some(old) = self.pages.put((v, page), Page::of(data, at)) {
                self.bytes -= old.len as u64;
            }
            at = end;
        }
        while self.bytes > self.cap {
            match self.pages.pop_lru() {
                Some((_, p)) => self.bytes -= p.len as u64,
                None => break,
            }
        }
    }
}

/// Put the pages of `data` (a fetch from page `start_page`) into the
/// slots of `have` (pages from `first`) they fall in.
pub fn fill(have: &mut [Option<Page>], first: u64, start_page: u64, data: &Bytes) {
    let n = data.len().div_ceil(PAGE as usize) as u64;
    for p in start_page..start_page + n {
        if p < first || p >= first + have.len() as u64 {
            continue;
        }
        let at = ((p - start_page) * PAGE) as usize;
        have[(p - first) as usize] = Some(Page::of(data, at));
    }
}

/// The bytes of `want`, lent without a copy, if `have` (its pages, from
/// `first`) are consecutive parts of one buffer.
pub fn joined(have: &[Option<Page>], first: u64, want: &Range<u64>) -> Option<Bytes> {
    let p0 = have.first()?.as_ref()?;
    let mut last = p0;
    for page in &have[1..] {
        let page = page.as_ref()?;
        if !last.followed_by(page) {
            return None;
        }
        last = page;
    }
    let lo = p0.at + usize::try_from(want.start.checked_sub(first * PAGE)?).ok()?;
    let hi = lo + usize::try_from(want.end - want.start).ok()?;
    (hi <= last.at + last.len).then(|| p0.run.slice(lo..hi))
}

/// Copy the bytes of `want` out of `have` (pages from `first`) into `buf`.
pub fn copy_out(have: &[Option<Page>], first: u64, want: &Range<u64>, buf: &mut [u8]) {
    for (i, page) in have.iter().enumerate() {
        let page = page.as_ref().expect("all pages present").bytes();
        let p0 = (first + i as u64) * PAGE;
        let lo = want.start.max(p0);
        let hi = want.end.min(p0 + page.len() as u64);
        if lo < hi {
            buf[(lo - want.start) as usize..(hi - want.start) as usize]
                .copy_from_slice(&page[(lo - p0) as usize..(hi - p0) as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_arithmetic() {
        assert_eq!(pages(&(0..1)), 0..1);
        assert_eq!(pages(&(4095..4097)), 0..2);
        assert_eq!(pages(&(4096..8192)), 1..2);
        assert_eq!(pages(&(5..5)), 0..0);
        assert_eq!(bytes_of(&(1..3), 10_000), 4096..10_000);
        assert_eq!(bytes_of(&(0..1), 100), 0..100);
    }

    #[test]
    fn read_around_rounds_small_reads_to_64k() {
        let len = 1 << 20;
        assert_eq!(around(&(100..4196), len), 0..AROUND);
        // Straddling a boundary: both windows.
        assert_eq!(around(&(AROUND - 10..AROUND + 10), len), 0..2 * AROUND);
        // Near the end of the object: clipped to it.
        assert_eq!(around(&(len - 10..len), len), len - AROUND..len);
        assert_eq!(around(&(0..10), 50), 0..50);
        // Large reads are taken as they are.
        assert_eq!(around(&(7..7 + AROUND), len), 7..7 + AROUND);
    }

    #[test]
    fn cache_accounts_bytes_and_evicts_lru() {
        let mut c = PageCache::new(3 * PAGE);
        let data = Bytes::from(vec![1u8; 2 * PAGE as usize]);
        c.insert(1, 0, &data, 1 << 20);
        assert_eq!(c.bytes(), 2 * PAGE);
        assert!(c.get(1, 0).is_some()); // page 0 now most recent
        c.insert(2, PAGE, &data, 1 << 20); // pages 1, 2 of version 2
        assert_eq!(c.bytes(), 3 * PAGE);
        assert!(c.contains(1, 0), "recently used page kept");
        assert!(!c.contains(1, 1), "least recently used page evicted");
        assert!(c.contains(2, 1) && c.contains(2, 2));
        // Re-inserting a page does not count it twice.
        c.insert(2, PAGE, &data.slice(..PAGE as usize), 1 << 20);
        assert_eq!(c.bytes(), 3 * PAGE);
    }

    #[test]
    fn partial_pages_only_at_the_end_of_the_object() {
        let mut c = PageCache::new(1 << 20);
        let data = Bytes::from(vec![7u8; PAGE as usize + 100]);
        c.insert(1, 0, &data, 1 << 20);
        assert!(c.contains(1, 0) && !c.contains(1, 1));
        c.insert(2, 0, &data, PAGE + 100);
        assert_eq!(c.get(2, 1).unwrap().bytes().len(), 100);
        assert_eq!(c.bytes(), 2 * PAGE + 100);
    }

    #[test]
    fn pages_of_fetches_assemble_a_read() {
        let obj: Vec<u8> = (0..5 * PAGE + 100).map(|i| (i % 251) as u8).collect();
        let want = PAGE + 10..4 * PAGE + 50;
        let need = pages(&want);
        let mut have = vec![None; (need.end - need.start) as usize];
        // One fetch of pages 0..3, one of pages 3..6 (the last partial).
        let a = Bytes::copy_from_slice(&obj[..3 * PAGE as usize]);
        let b = Bytes::copy_from_slice(&obj[3 * PAGE as usize..]);
        fill(&mut have, need.start, 0, &a);
        assert!(have[0].is_some() && have[1].is_some() && have[2].is_none());
        fill(&mut have, need.start, 3, &b);
        assert!(have.iter().all(Option::is_some));
        let mut buf = vec![0; (want.end - want.start) as usize];
        copy_out(&have, need.start, &want, &mut buf);
        assert_eq!(buf, obj[want.start as usize..want.end as usize]);
        // Reading the partial last page.
        let want = 5 * PAGE..5 * PAGE + 100;
        let mut have = vec![None];
        fill(&mut have, 5, 3, &b);
        let mut buf = vec![0; 100];
        copy_out(&have, 5, &want, &mut buf);
        assert_eq!(buf, obj[5 * PAGE as usize..]);
    }

    /// A read inside one fetch's pages is lent that fetch's bytes, from
    /// the cache as from the fetch; one across two fetches is not.
    #[test]
    fn a_read_inside_one_fetch_is_lent_its_bytes() {
        let obj: Vec<u8> = (0..5 * PAGE + 100).map(|i| (i % 251) as u8).collect();
        let a = Bytes::copy_from_slice(&obj[..3 * PAGE as usize]);
        let b = Bytes::copy_from_slice(&obj[3 * PAGE as usize..]);
        let len = obj.len() as u64;
        let mut c = PageCache::new(1 << 20);
        c.insert(1, 0, &a, len);
        c.insert(1, 3 * PAGE, &b, len);
        let lent = |want: Range<u64>, c: &mut PageCache| {
            let need = pages(&want);
            let have: Vec<Option<Page>> = need.clone().map(|p| c.get(1, p)).collect();
            joined(&have, need.start, &want)
        };
        for want in [10..3 * PAGE, PAGE + 1..PAGE + 2, 3 * PAGE + 7..len] {
            let got = lent(want.clone(), &mut c).expect("inside one fetch");
            assert_eq!(got[..], obj[want.start as usize..want.end as usize]);
        }
        assert!(lent(PAGE..4 * PAGE, &mut c).is_none(), "across two fetches");
        // From the fetch itself, as a read waiting for it fills its pages.
        let want = 3 * PAGE + 5..4 * PAGE + 5;
        let need = pages(&want);
        let mut have = vec![None; (need.end - need.start) as usize];
        fill(&mut have, need.start, 3, &b);
        let got = joined(&have, need.start, &want).unwrap();
        assert_eq!(got[..], obj[want.start as usize..want.end as usize]);
        assert_eq!(got.as_ptr(), b[5..].as_ptr(), "no copy");
    }
}
