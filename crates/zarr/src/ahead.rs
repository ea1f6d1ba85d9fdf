//! The chunks of one read decoded in parallel.
//!
//! A C-order read of an array crosses a row of chunks: a 1 MiB read of an
//! 8192-wide float32 array in 1024x1024 chunks is 32 rows of 8 runs, one in
//! each of 8 chunks. Served one run at a time on the reader's thread, the
//! chunks would be fetched and decoded one after the other. Before the runs
//! are copied, the chunks the read touches past the first are handed to the
//! runner of the array's [`blosc_decode::Env`] (if it has one):
//! - a chunk decoded whole is queued in the runner's table under its cache
//!   key, so that a reader coming to it while it is still queued claims it
//!   (never idling behind the queue), one being decoded is waited for, and
//!   none is decoded twice ([`crate::chunks::Chunks::get`]);
//! - of a chunk read by Blosc block, a job opens it and decodes the blocks
//!   the read touches into the cache (a reader wanting a block being
//!   decoded waits for it: `Ahead::start` in blosc-decode).
//!
//! At most as many chunks as half the cache holds are handed off: a chunk
//! decoded ahead and evicted before it is copied out would be decoded twice.

use crate::array::Inner;
use crate::chunks::{whole, Chunk};
use blosc_decode::ahead::JobKind;
use std::collections::HashMap;
use std::sync::Arc;

/// A chunk a read touches: its grid position and the range of its values
/// the read wants.
struct Touched {
    pos: Vec<u64>,
    lo: u64,
    hi: u64,
}

/// Hand the chunks that bytes `off..end` of `a`'s values touch, past the
/// first, to the runner (see the module's text).
pub(crate) fn queue(a: &Arc<Inner>, off: u64, end: u64) {
    let env = a.chunks.env();
    if !env.ahead.enabled() {
        return;
    }
    let room = env.cache.budget() / 2 / a.meta.chunk_bytes().max(1);
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    if room < 2 {
        return;
    }
    for (id, t) in touched(a, off, end, room).into_iter().skip(1) {
        if a.chunks.by_block() {
            queue_blocks(a, id, t);
        } else if !a.chunks.pending(id) {
            let job = a.clone();
            let key = a.chunks.key(id);
            let work = move || whole(&job.chunks.load_kept(id, |id| job.fetch(&t.pos, id)));
            if !env.ahead.submit(key, Box::new(work)) {
                return;
            }
        }
    }
}

/// The first `max` chunks that bytes `off..end` touch, in the order the
/// read comes to them, by number.
fn touched(a: &Inner, off: u64, end: u64, max: usize) -> Vec<(u64, Touched)> {
    let mut out: Vec<(u64, Touched)> = Vec::new();
    let mut at: HashMap<u64, usize> = HashMap::new();
    let mut b = off;
    while b < end {
        let run = a.run_at(b, end);
        let id = a.id(&run.pos);
        let (lo, hi) = (run.at, run.at + run.len);
        match at.get(&id) {
            Some(&k) => {
                let t = &mut out[k].1;
                (t.lo, t.hi) = (t.lo.min(lo), t.hi.max(hi));
            }
            None if out.len() == max => break,
            None => {
                at.insert(id, out.len());
                out.push((
                    id,
                    Touched {
                        pos: run.pos,
                        lo,
                        hi,
                    },
                ));
            }
        }
        b += run.len;
    }
    out
}

/// Decode, on the runner, the blocks of chunk `id` (read by Blosc block)
/// that `t` wants, unless they are all cached.
fn queue_blocks(a: &Arc<Inner>, id: u64, t: Touched) {
    let env = a.chunks.env();
    if let Some(c) = a.chunks.opened(id) {
        let Some(l) = c.first_layout() else { return };
        let (first, last) = (l.block_at(t.lo), l.block_at(t.hi - 1));
        if (first..=last).all(|i| env.cache.contains(&a.chunks.block_key(id, i))) {
            return;
        }
    }
    let job = a.clone();
    env.ahead.spawn(
        JobKind::Decode,
        Box::new(move || {
            // Errors are left to the reader, which reports them.
            let Ok(Chunk::Blocks(c)) = job.chunk(&t.pos) else {
                return;
            };
            let Some(l) = c.first_layout() else { return };
            let mut one = [0u8; 1];
            for i in l.block_at(t.lo)..=l.block_at(t.hi - 1) {
                if c.read_at(l.block_start(i), &mut one).is_err() {
                    return;
                }
            }
        }),
    );
}
