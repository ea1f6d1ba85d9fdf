//! A read served chunk by chunk, its chunks decoded in parallel.
//!
//! A C-order read of an array crosses a row of chunks: a 1 MiB read of an
//! 8192-wide float32 array in 1024x1024 chunks is 32 rows of 8 runs, one in
//! each of 8 chunks. The runs of a read are listed first (in batches of at
//! most [`BATCH`]), with the chunks they touch in the order the read comes
//! to them. The chunks past the first are handed to the runner of the
//! array's [`blosc_decode::Env`] (if it has one):
//! - a chunk decoded whole is queued in the runner's table under its cache
//!   key, so that a reader coming to it while it is still queued claims it
//!   (never idling behind the queue), one being decoded is waited for, and
//!   none is decoded twice ([`crate::chunks::Chunks::get`]);
//! - of a chunk read by Blosc block, a job opens it and decodes the blocks
//!   the read touches into the cache (a reader wanting a block being
//!   decoded waits for it: `Ahead::start` in blosc-decode).
//!
//! Then the runs are copied chunk by chunk: the first chunk, then the
//! others from the last back, so that the reader meets the runner's jobs
//! (taken from the front) last. At most as many chunks as half the cache
//! holds are handed off: a chunk decoded ahead and evicted before it is
//! copied out would be decoded twice.
//!
//! A reader that reads on (`Fetch::Whole`) also has the chunks (or Blosc
//! blocks) of the [`NEXT`] bytes past each read handed to the runner
//! (`decode_ahead` set to a size sets how many; 0 turns it off): the
//! kernel keeps only about 1 MiB of requests ahead of it, so without this
//! the read that first comes to a row of Blosc blocks (or of chunks)
//! waits for all of them, and the CPUs idle during the reads that follow.

use crate::array::{Fetch, Inner};
use crate::chunks::{whole, Chunk};
use crate::Result;
use blosc_decode::ahead::policy::DecodeAhead;
use blosc_decode::ahead::JobKind;
use std::collections::HashMap;
use std::sync::Arc;

/// Runs listed and served together, at most (bounds the list at 384 KiB
/// for arrays of very narrow chunks).
const BATCH: usize = 1 << 14;

/// A chunk a read touches: its grid position and the range of its values
/// the read wants.
struct Touched {
    id: u64,
    pos: Vec<u64>,
    lo: u64,
    hi: u64,
}

/// A run of a read: `len` bytes at `at` of touched chunk `k` go to
/// `out[out..]`.
#[derive(Clone, Copy)]
struct Piece {
    k: usize,
    at: u64,
    len: usize,
    out: usize,
}

/// Fill `out` with the C-order values' bytes from `off` (all inside the
/// array).
pub(crate) fn read(a: &Arc<Inner>, off: u64, out: &mut [u8]) -> Result<()> {
    let end = off + out.len() as u64;
    let how = a.note_read(off, out.len() as u64);
    let mut b = off;
    while b < end {
        let (touched, mut pieces, next) = list(a, off, b, end);
        queue(a, &touched, 1, how);
        // Chunk 0 first, then the others from the last back.
        let rank = |k: usize| if k == 0 { 0 } else { touched.len() - k };
        pieces.sort_by_key(|p| rank(p.k));
        for group in pieces.chunk_by(|x, y| x.k == y.k) {
            let t = &touched[group[0].k];
            let chunk = a.chunk(&t.pos, how)?;
            for p in group {
                a.copy(&chunk, &t.pos, p.at, &mut out[p.out..p.out + p.len], how)?;
            }
        }
        b = next;
    }
    if how == Fetch::Whole {
        queue_next(a, end);
    }
    Ok(())
}

/// Bytes past a reader that reads on whose chunks (or Blosc blocks) the
/// runner decodes while the reader is served what is decoded already.
const NEXT: u64 = 4 << 20;

/// Hand the chunks (or Blosc blocks) of the [`NEXT`] bytes from `end` to
/// the runner, those not decoded or queued yet: as many bytes as the
/// `Env`'s `decode_ahead` says when it is set to a size (0: none).
fn queue_next(a: &Arc<Inner>, end: u64) {
    let next = match a.chunks.env().decode_ahead {
        DecodeAhead::Auto => NEXT,
        DecodeAhead::Fixed(n) => n,
    };
    let stop = end.saturating_add(next).min(a.meta.data_bytes());
    if end < stop {
        let (touched, _, _) = list(a, end, end, stop);
        queue(a, &touched, 0, Fetch::Whole);
    }
}

/// The runs of bytes `b..end` (of a read from `off`), at most [`BATCH`],
/// and the chunks they touch; returns where the next batch starts.
fn list(a: &Inner, off: u64, mut b: u64, end: u64) -> (Vec<Touched>, Vec<Piece>, u64) {
    let (mut touched, mut pieces) = (Vec::<Touched>::new(), Vec::new());
    let mut at: HashMap<u64, usize> = HashMap::new();
    while b < end && pieces.len() < BATCH {
        let run = a.run_at(b, end);
        let id = a.id(&run.pos);
        let (lo, hi) = (run.at, run.at + run.len);
        let k = *at.entry(id).or_insert(touched.len());
        if k == touched.len() {
            touched.push(Touched {
                id,
                pos: run.pos,
                lo,
                hi,
            });
        } else {
            let t = &mut touched[k];
            (t.lo, t.hi) = (t.lo.min(lo), t.hi.max(hi));
        }
        pieces.push(Piece {
            k,
            at: run.at,
            len: run.len as usize,
            out: (b - off) as usize,
        });
        b += run.len;
    }
    (touched, pieces, b)
}

/// Hand the `touched` chunks past the first `skip` to the runner (see
/// the module's text).
fn queue(a: &Arc<Inner>, touched: &[Touched], skip: usize, how: Fetch) {
    let env = a.chunks.env();
    if !env.ahead.enabled() || touched.len() <= skip {
        return;
    }
    let room = env.cache.budget() / 2 / a.meta.chunk_bytes().max(1);
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    for t in touched.iter().skip(skip).take(room.saturating_sub(skip)) {
        if a.chunks.by_block() {
            queue_blocks(a, t, how);
        } else if !a.chunks.pending(t.id) {
            let (job, id, pos) = (a.clone(), t.id, t.pos.clone());
            let work = move || whole(&job.chunks.load_kept(id, |id| job.fetch(&pos, id, how)));
            if !env.ahead.submit(a.chunks.key(id), Box::new(work)) {
                return;
            }
        }
    }
}

/// Decode, on the runner, the blocks of a chunk read by Blosc block that
/// `t` wants, from the first neither cached nor queued (none if there is
/// none). A reader that reads on is in the middle of the first block of
/// the bytes past its read: that block is cached, and once the reader is
/// done with it its buffer may be decoded into; a job must not decode it
/// again.
fn queue_blocks(a: &Arc<Inner>, t: &Touched, how: Fetch) {
    let env = a.chunks.env();
    let mut lo = t.lo;
    if let Some(c) = a.chunks.opened(t.id) {
        let Some(l) = c.first_layout() else { return };
        let (first, last) = (l.block_at(t.lo), l.block_at(t.hi - 1));
        let ready = |k| env.cache.contains(&k) || env.ahead.lookup(&k).is_some();
        let Some(i) = (first..=last).find(|&i| !ready(a.chunks.block_key(t.id, i))) else {
            return;
        };
        lo = lo.max(l.block_start(i));
    }
    let (job, pos, hi) = (a.clone(), t.pos.clone(), t.hi);
    env.ahead.spawn(
        JobKind::Decode,
        Box::new(move || {
            // Errors are left to the reader, which reports them.
            let Ok(Chunk::Blocks(c)) = job.chunk(&pos, how) else {
                return;
            };
            let Some(l) = c.first_layout() else { return };
            let mut one = [0u8; 1];
            for i in l.block_at(lo)..=l.block_at(hi - 1) {
                if c.read_at(l.block_start(i), &mut one).is_err() {
                    return;
                }
            }
        }),
    );
}
