//! Requests in flight that a signal to their caller ends at once.
//!
//! A process waiting in a FUSE request (a read the remote server holds)
//! cannot die until the request is answered: the kernel waits for the
//! answer even after `SIGKILL`. It sends an INTERRUPT naming the request
//! instead, which a free worker thread reads. Every request that may wait
//! is registered here with its reply ([`InFlight::start`]); an interrupt
//! takes the reply and answers `EINTR`, so the caller is released, and the
//! worker, when its wait ends, finds the reply gone and answers nothing
//! (undoing what its answer would have handed to the kernel). Whoever
//! takes the reply out of its slot, under the slot's lock, answers: exactly
//! one of the two.
//!
//! An interrupt can be read before its request is registered (another
//! worker read the request and has not reached [`InFlight::start`] yet):
//! the unique is remembered, so the request is answered `EINTR` as it
//! starts, and the kernel is asked to send the interrupt again
//! ([`Outcome::Again`]) a few times. An interrupt of a request that is
//! never registered (it does not wait, or it has been answered) is then
//! ignored: it cannot come back forever.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A reply that answers its request `EINTR`.
pub trait Answer: Send + 'static {
    fn interrupted(self);
}

/// What an interrupt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Its request was answered `EINTR`.
    Answered,
    /// Its request is being answered by its worker.
    Finished,
    /// Its request is not known yet: the kernel should send it again.
    Again,
    /// Its request was not known after asking again: ignored.
    Ignored,
}

/// How many times an unknown request's interrupt is asked again.
const AGAIN: u32 = 3;
/// Unknown uniques remembered per shard (the oldest are dropped).
const EARLY: usize = 64;
/// Shards, so that FUSE threads seldom share a lock.
const SHARDS: usize = 16;

/// The requests in flight that an interrupt can answer.
pub struct InFlight {
    shards: [Mutex<Shard>; SHARDS],
}

#[derive(Default)]
struct Shard {
    running: HashMap<u64, Arc<dyn Interrupt>>,
    /// Interrupted before they started: unique to times asked again.
    early: BTreeMap<u64, u32>,
}

trait Interrupt: Send + Sync {
    /// Answer `EINTR` if the reply is still there.
    fn interrupt(&self) -> bool;
}

struct Slot<R>(Mutex<Option<R>>);

impl<R: Answer> Interrupt for Slot<R> {
    fn interrupt(&self) -> bool {
        let taken = self.0.lock().take();
        taken.map(R::interrupted).is_some()
    }
}

/// A registered request: its reply until the worker takes it back.
pub struct Call<'a, R: Answer> {
    reg: &'a InFlight,
    unique: u64,
    slot: Arc<Slot<R>>,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            shards: std::array::from_fn(|_| Mutex::default()),
        }
    }
}

impl InFlight {
    fn shard(&self, unique: u64) -> &Mutex<Shard> {
        // The kernel numbers requests in steps of 2.
        &self.shards[(unique >> 1) as usize % SHARDS]
    }

    /// Register request `unique`, about to wait, with its `reply`. `None`
    /// when it was interrupted already: it has been answered `EINTR`.
    pub fn start<R: Answer>(&self, unique: u64, reply: R) -> Option<Call<'_, R>> {
        let slot = Arc::new(Slot(Mutex::new(Some(reply))));
        {
            let mut s = self.shard(unique).lock();
            if s.early.remove(&unique).is_none() {
                s.running.insert(unique, slot.clone());
                return Some(Call {
                    reg: self,
                    unique,
                    slot,
                });
            }
        }
        slot.interrupt();
        None
    }

    /// The kernel interrupts request `unique`.
    pub fn interrupt(&self, unique: u64) -> Outcome {
        let slot = {
            let mut s = self.shard(unique).lock();
            match s.running.get(&unique) {
                Some(slot) => slot.clone(),
                None => return s.unknown(unique),
            }
        };
        if slot.interrupt() {
            Outcome::Answered
        } else {
            Outcome::Finished
        }
    }

    /// Requests registered now (tests).
    pub fn running(&self) -> usize {
        self.shards.iter().map(|s| s.lock().running.len()).sum()
    }
}

impl Shard {
    fn unknown(&mut self, unique: u64) -> Outcome {
        let asked = self.early.entry(unique).or_insert(0);
        *asked += 1;
        let again = *asked <= AGAIN;
        while self.early.len() > EARLY {
            self.early.pop_first();
        }
        if again {
            Outcome::Again
        } else {
            Outcome::Ignored
        }
    }
}

impl<R: Answer> Call<'_, R> {
    /// Use the reply in place (add directory entries to it); `None` once
    /// interrupted.
    pub fn with<T>(&self, f: impl FnOnce(&mut R) -> T) -> Option<T> {
        self.slot.0.lock().as_mut().map(f)
    }

    /// The wait is over: the reply to answer with, or `None` when the
    /// request was interrupted (answered `EINTR`).
    pub fn finish(self) -> Option<R> {
        self.slot.0.lock().take()
    }
}

impl<R: Answer> Drop for Call<'_, R> {
    fn drop(&mut self) {
        self.reg
            .shard(self.unique)
            .lock()
            .running
            .remove(&self.unique);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Log = Arc<Mutex<Vec<(u64, &'static str)>>>;

    /// A reply that records how it answered.
    struct Fake(u64, Log);

    impl Answer for Fake {
        fn interrupted(self) {
            self.1.lock().push((self.0, "EINTR"));
        }
    }

    impl Fake {
        fn reply(self) {
            self.1.lock().push((self.0, "reply"));
        }
    }

    #[test]
    fn an_interrupt_answers_a_running_request_and_its_worker_does_not() {
        let (reg, log) = (InFlight::default(), Log::default());
        let call = reg.start(2, Fake(2, log.clone())).unwrap();
        assert_eq!(reg.interrupt(2), Outcome::Answered);
        assert_eq!(reg.interrupt(2), Outcome::Finished);
        assert!(call.with(|_| ()).is_none());
        assert!(call.finish().is_none());
        assert_eq!(*log.lock(), [(2, "EINTR")]);
        assert_eq!(reg.running(), 0);
    }

    #[test]
    fn a_finished_request_is_not_interrupted() {
        let (reg, log) = (InFlight::default(), Log::default());
        let call = reg.start(4, Fake(4, log.clone())).unwrap();
        call.finish().unwrap().reply();
        assert_eq!(reg.running(), 0);
        assert_eq!(reg.interrupt(4), Outcome::Again);
        assert_eq!(*log.lock(), [(4, "reply")]);
    }

    #[test]
    fn an_interrupt_before_the_start_answers_at_the_start() {
        let (reg, log) = (InFlight::default(), Log::default());
        assert_eq!(reg.interrupt(6), Outcome::Again);
        assert!(reg.start(6, Fake(6, log.clone())).is_none());
        assert_eq!(*log.lock(), [(6, "EINTR")]);
        assert_eq!(reg.running(), 0);
        // Remembered once: the next request of that number is new.
        drop(reg.start(6, Fake(6, log.clone())).unwrap());
        assert_eq!(log.lock().len(), 1);
    }

    #[test]
    fn an_unknown_request_is_asked_again_a_bounded_number_of_times() {
        let reg = InFlight::default();
        let got: Vec<_> = (0..AGAIN + 2).map(|_| reg.interrupt(8)).collect();
        assert!(got[..AGAIN as usize].iter().all(|o| *o == Outcome::Again));
        assert!(got[AGAIN as usize..].iter().all(|o| *o == Outcome::Ignored));
    }

    #[test]
    fn unknown_uniques_kept_are_bounded() {
        let reg = InFlight::default();
        for u in 0..100_000u64 {
            reg.interrupt(u * 2);
        }
        let kept: usize = reg.shards.iter().map(|s| s.lock().early.len()).sum();
        assert!(kept <= EARLY * SHARDS, "{kept}");
    }

    #[test]
    fn a_call_dropped_without_finishing_is_no_longer_registered() {
        let (reg, log) = (InFlight::default(), Log::default());
        drop(reg.start(10, Fake(10, log.clone())).unwrap());
        assert_eq!(reg.running(), 0);
        assert_eq!(reg.interrupt(10), Outcome::Again);
        assert!(log.lock().is_empty());
    }

    /// An interrupt racing its worker: exactly one of them answers.
    #[test]
    fn exactly_one_answer_when_interrupt_and_worker_race() {
        let (reg, log) = (InFlight::default(), Log::default());
        for u in (0..4000u64).map(|i| i * 2) {
            let call = reg.start(u, Fake(u, log.clone())).unwrap();
            std::thread::scope(|s| {
                s.spawn(|| {
                    if let Some(r) = call.finish() {
                        r.reply();
                    }
                });
                s.spawn(|| reg.interrupt(u));
            });
        }
        let log = log.lock();
        assert_eq!(log.len(), 4000);
        let mut seen: Vec<u64> = log.iter().map(|e| e.0).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 4000);
    }
}
