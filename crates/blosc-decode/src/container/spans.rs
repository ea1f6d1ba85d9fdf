//! Decoding ahead of a sequential reader, in spans.
//!
//! A sequential reader's next spans (`Env::span` presented bytes each,
//! as many as `ahead::policy::spans_ahead` says for the CPUs and the readers
//! active now) are decoded by the runner, each into one buffer kept in the
//! block cache. A read that falls in a decoded span is answered from it
//! without a copy ([`Served::Shared`]); one that straddles two is copied
//! out of them. Once all of a span has been served it leaves the cache.
//!
//! A span still queued when its reader gets there is dropped from the
//! queue and the reader decodes just what it asked for (all workers are
//! busy: waiting would idle the reader's other requests behind one span);
//! a span being decoded is waited for. A job that fails leaves no span:
//! the read decodes its range itself and reports the error.

use super::Container;
use crate::ahead::policy::spans_ahead;
use crate::ahead::Claim;
use crate::cache::{Block, BlockKey, Stats};
use crate::deferred::Deferred;
use crate::error::Result;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// One reader of a container (a file handle): whether its reads follow
/// each other, and how far ahead of it spans were queued. Readers of one
/// file at different places (four processes on four quarters) are each
/// sequential.
pub struct Stream {
    id: u64,
    /// Where its last read ended (presented offset).
    last_end: AtomicU64,
    /// The first span not queued for it yet.
    ahead_to: AtomicU64,
}

static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

impl Stream {
    /// A reader that has read nothing yet.
    pub fn new() -> Stream {
        Stream {
            id: NEXT_STREAM.fetch_add(1, Ordering::Relaxed),
            last_end: AtomicU64::new(0),
            ahead_to: AtomicU64::new(0),
        }
    }
}

impl Default for Stream {
    fn default() -> Self {
        Stream::new()
    }
}

/// What a read produced.
pub enum Served {
    /// `n` bytes, in the caller's buffer.
    Buf(usize),
    /// These bytes of a decoded span (the caller's buffer is untouched).
    Shared(Block, Range<usize>),
}

impl Served {
    /// The bytes served, from the span or from `buf`.
    pub fn bytes<'a>(&'a self, buf: &'a [u8]) -> &'a [u8] {
        match self {
            Served::Buf(n) => &buf[..*n],
            Served::Shared(b, r) => &b[r.clone()],
        }
    }
}

/// Spans are keyed in the block cache apart from blocks by this chunk number.
const SPAN_CHUNK: u64 = u64::MAX;

/// Spans whose bytes served are counted, per container, at most.
const SERVED_KEPT: usize = 256;

impl Container {
    /// [`Container::read_at_deferring`] for reader `stream`, decoding ahead
    /// of it on the runner while it reads sequentially (see the module) and
    /// answering from what was decoded. A read is sequential when it starts
    /// where the reader's previous one ended, give or take its own length
    /// (the kernel's read-ahead requests may arrive out of order). A large
    /// read that is not has the stored blocks of the window after it
    /// hinted to the source when it jumped into a slice of an array that
    /// goes on past it (`next.rs`).
    pub fn read_shared(
        self: &Arc<Self>,
        stream: &Stream,
        offset: u64,
        buf: &mut [u8],
        later: &mut Deferred,
    ) -> Result<Served> {
        let (end, jump) = self.note_read(offset, buf.len());
        let prev = stream.last_end.swap(end, Ordering::Relaxed);
        let depth = if offset.abs_diff(prev) <= buf.len() as u64 {
            self.spans_wanted(stream)
        } else {
            self.env.ahead.readers.leave(stream.id);
            stream.ahead_to.store(0, Ordering::Relaxed);
            0
        };
        self.hint_cold_chunks(offset, buf.len(), offset.abs_diff(prev));
        let served = self.serve_spans(offset, buf, later);
        self.hint_headers(jump);
        let served = served?;
        if offset.abs_diff(prev) > buf.len() as u64 {
            self.hint_next_window(offset, buf.len());
        }
        self.queue_spans(stream, end, depth);
        Ok(served)
    }

    /// `stream` has stopped reading (its file was closed): it no longer
    /// shares the idle CPUs.
    pub fn close_stream(&self, stream: &Stream) {
        self.env.ahead.readers.leave(stream.id);
    }

    /// Spans to keep ahead of `stream` now.
    fn spans_wanted(&self, stream: &Stream) -> usize {
        let ahead = &self.env.ahead;
        if !ahead.enabled() || self.len() <= self.env.span {
            return 0;
        }
        let readers = ahead.readers.note(stream.id, Instant::now());
        let budget = self.env.cache.budget() / 2;
        let setting = self.env.decode_ahead;
        spans_ahead(setting, self.env.span, ahead.workers(), budget, readers)
    }

    /// Answer `offset..` (`buf.len()` bytes at most) from decoded spans
    /// where there are some, decoding the rest here.
    fn serve_spans(&self, offset: u64, buf: &mut [u8], later: &mut Deferred) -> Result<Served> {
        let len = self.len();
        if offset >= len || buf.is_empty() {
            return Ok(Served::Buf(0));
        }
        let n = (buf.len() as u64).min(len - offset) as usize;
        let span = self.env.span.max(1);
        let first = offset / span;
        let last = (offset + n as u64 - 1) / span;
        if first == last {
            if let Some(b) = self.span(first) {
                let at = (offset - first * span) as usize;
                self.served(first, n as u64);
                return Ok(Served::Shared(b, at..at + n));
            }
            return self
                .read_view_at(offset, &mut buf[..n], later)
                .map(Served::Buf);
        }
        // Straddling spans: copy from those decoded, decode the rest here.
        let mut done = 0;
        while done < n {
            let pos = offset + done as u64;
            let k = pos / span;
            let part = ((k + 1).saturating_mul(span) - pos).min((n - done) as u64) as usize;
            let out = &mut buf[done..done + part];
            match self.span(k) {
                Some(b) => {
                    let at = (pos - k * span) as usize;
                    out.copy_from_slice(&b[at..at + part]);
                    self.served(k, part as u64);
                }
                None => {
                    let got = self.read_view_at(pos, out, later)?;
                    if got < part {
                        return Ok(Served::Buf(done + got));
                    }
                }
            }
            done += part;
        }
        Ok(Served::Buf(n))
    }

    fn span_key(&self, k: u64) -> Option<BlockKey> {
        u32::try_from(k).ok().map(|k| (self.id, SPAN_CHUNK, k))
    }

    /// Span `k` if it was decoded ahead (waiting for it if it is being
    /// decoded now); a span still queued is dropped from the queue.
    fn span(&self, k: u64) -> Option<Block> {
        if !self.spans_queued.load(Ordering::Relaxed) {
            return None;
        }
        let key = self.span_key(k)?;
        let ahead = &self.env.ahead;
        if let Some(slot) = ahead.lookup(&key) {
            match ahead.claim(&slot) {
                Claim::Mine => {
                    ahead.finish(key, &slot, None);
                    return None;
                }
                Claim::Done(Some(b)) => return Some(b),
                Claim::Done(None) => return None,
            }
        }
        self.env.cache.get(&key)
    }

    /// `n` more bytes of span `k` were served: once all of it has been, it
    /// leaves the cache (the page cache has it now; its buffer is recycled
    /// when the last reply from it is sent).
    fn served(&self, k: u64, n: u64) {
        Stats::add(&self.env.stats.span_bytes_served, n);
        let span = self.env.span.max(1);
        let span_len = span.min(self.len() - k * span);
        let mut served = self.served.lock();
        let done = match served.iter_mut().find(|(s, _)| *s == k) {
            Some((_, b)) => {
                *b = b.saturating_add(n);
                *b >= span_len
            }
            None => {
                // The oldest goes first: a span it left part-read (evicted,
                // or its reader jumped) then leaves the cache by age.
                if served.len() >= SERVED_KEPT {
                    served.remove(0);
                }
                served.push((k, n));
                n >= span_len
            }
        };
        if done {
            served.retain(|&(s, _)| s != k);
            if let Some(key) = self.span_key(k) {
                drop(self.env.cache.take(&key));
            }
        }
    }

    /// After a read ending at `end`, have spans up to `depth` past the one
    /// `end` is in decoded by the runner (those not decoded or queued yet).
    fn queue_spans(self: &Arc<Self>, stream: &Stream, end: u64, depth: usize) {
        if depth == 0 || end >= self.len() {
            return;
        }
        let span = self.env.span.max(1);
        let here = end.saturating_sub(1) / span; // the span just read from
        let last = (here + depth as u64).min((self.len() - 1) / span);
        // Past what earlier reads queued: with several FUSE threads a
        // slower request must not queue spans a faster one has consumed.
        let mut k = (here + 1).max(stream.ahead_to.fetch_max(last + 1, Ordering::Relaxed));
        while k <= last {
            if !self.queue_span(k) {
                stream.ahead_to.fetch_min(k, Ordering::Relaxed);
                return;
            }
            k += 1;
        }
    }

    /// Hand span `k` to the runner unless it is decoded or queued already.
    /// False when the runner refuses (its queue is full).
    fn queue_span(self: &Arc<Self>, k: u64) -> bool {
        let Some(key) = self.span_key(k) else {
            return false;
        };
        if self.env.cache.contains(&key) || self.env.ahead.lookup(&key).is_some() {
            return true;
        }
        self.spans_queued.store(true, Ordering::Relaxed);
        let me = self.clone();
        self.env
            .ahead
            .submit(key, Box::new(move || me.decode_span(k, key)))
    }

    /// Decode span `k` into a buffer of its own and the cache (`None` if
    /// any of it fails: the reads of it then decode and report).
    fn decode_span(&self, k: u64, key: BlockKey) -> Option<Block> {
        let span = self.env.span.max(1);
        let at = k.checked_mul(span)?;
        let n = span.min(self.len().checked_sub(at)?) as usize;
        let (mut out, _) = self.env.cache.buffer(n);
        match self.read_view_at(at, &mut out, &mut Deferred::none()) {
            Ok(got) if got == n => {}
            _ => {
                self.env.cache.put_spare(out);
                return None;
            }
        }
        Stats::add(&self.env.stats.spans_decoded, 1);
        let out = Arc::new(out);
        self.env.cache.insert(key, out.clone());
        Some(out)
    }
}
