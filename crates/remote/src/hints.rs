//! Background fetches of what a container says it will need (the starts of
//! its chunks, after its first random read): queued per object and fetched
//! at most [`PER_OBJECT`] GETs at a time per object (and
//! `Core::hints` at a time in all), neighbouring ranges as one GET. The
//! reads that come meanwhile join a fetch of the pages they need, or fetch
//! what no hint covers yet; they never wait for a queue.

use crate::fetch::Pin;
use crate::object::{start_run, unclaimed};
use crate::page_cache::{self, Version, AROUND};
use crate::Core;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

/// Hint GETs in flight for one object.
pub(crate) const PER_OBJECT: usize = 2;
/// Hinted ranges this close to each other are fetched as one GET...
const GAP: u64 = AROUND;
/// ... of at most this many bytes.
const MAX_RUN: u64 = 1 << 20;

/// The hints of one object not fetched yet.
#[derive(Default)]
pub(crate) struct Hints {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Range<u64>>,
    /// Tasks fetching from `queue`.
    workers: usize,
}

impl Hints {
    /// Queue `want` of `obj` (version `v`), and start a task fetching the
    /// queue if fewer than [`PER_OBJECT`] are.
    pub(crate) fn push(
        self: &Arc<Self>,
        core: &Arc<Core>,
        obj: &Arc<Pin>,
        v: Version,
        want: Range<u64>,
    ) {
        let mut st = self.state.lock();
        st.queue.push_back(want);
        if st.workers < PER_OBJECT {
            st.workers += 1;
            let (me, core, obj) = (self.clone(), core.clone(), obj.clone());
            crate::net::runtime().spawn(me.work(core, obj, v));
        }
    }

    /// Fetch queued hints, one GET at a time, until none is left.
    async fn work(self: Arc<Self>, core: Arc<Core>, obj: Arc<Pin>, v: Version) {
        loop {
            let Some(run) = self.next_run() else { return };
            let Ok(_permit) = core.hints.acquire().await else {
                self.state.lock().workers -= 1;
                return;
            };
            if let Some(pages) = unclaimed(&core, v, page_cache::pages(&run)) {
                let _ = start_run(&core, &obj, v, pages).await;
            }
        }
    }

    /// The next GET's range: the first queued hint and those after it
    /// within [`GAP`], up to [`MAX_RUN`] bytes. None (and one worker less)
    /// when the queue is empty.
    fn next_run(&self) -> Option<Range<u64>> {
        let mut st = self.state.lock();
        let Some(mut run) = st.queue.pop_front() else {
            st.workers -= 1;
            return None;
        };
        while let Some(next) = st.queue.front() {
            let joined = run.start.min(next.start)..run.end.max(next.end);
            let near = next.start <= run.end.saturating_add(GAP)
                && next.end.saturating_add(GAP) >= run.start;
            if !near || joined.end - joined.start > MAX_RUN {
                break;
            }
            run = joined;
            st.queue.pop_front();
        }
        Some(run)
    }
}
