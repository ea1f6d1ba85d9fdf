//! What a whole listing of one remote directory said, kept compact (its
//! entries' names once, sorted, each with the little an object needs),
//! and the gate that has one listing of a directory made at a time and
//! shared by every thread that asked for it while it ran.

use super::{logged, Node, RemoteTree, Seen, PRUNE_AT};
use crate::fs::ToErrno;
use bloscfs_remote::{Listing, Object};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// How long a listing that took `took` is trusted, `ttl` given: `ttl`
/// from its end, or four times as long as it took if that is longer. A
/// listing of a million names takes longer than `ttl`: made again by the
/// first lookup after `ttl`, it would hold every lookup up while it ran,
/// and be stale again when it ended; this way a directory's listing takes
/// at most a fifth of the time.
fn trusted_for(ttl: Duration, took: Duration) -> Duration {
    ttl.max(took.saturating_mul(4))
}

/// One entry of a listing: a directory, or an object whose key is the
/// directory's joined with the name.
struct Rec {
    name: Box<str>,
    /// `None` for a directory.
    obj: Option<Obj>,
}

/// What an object listing said of an object, without its key.
struct Obj {
    len: u64,
    etag: Option<Box<str>>,
    mtime: Option<SystemTime>,
}

/// A listing of a whole directory.
pub(super) struct Listed {
    /// When the listing ended, and how long it took.
    ended: Instant,
    took: Duration,
    /// The 512-byte blocks its objects use (a sparse frame's `st_blocks`).
    pub(super) blocks: u64,
    /// Sorted by name, one entry a name (a directory wins over an object
    /// of the same name).
    recs: Vec<Rec>,
}

impl Listed {
    /// Keep `listing`, started at `started`. Objects named like their
    /// directory ("a/" kept as a marker) are not entries.
    pub(super) fn new(listing: Listing, started: Instant) -> Listed {
        let mut recs = Vec::with_capacity(listing.dirs.len() + listing.objects.len());
        let mut blocks = 0;
        for d in listing.dirs {
            recs.push(Rec {
                name: d.into_boxed_str(),
                obj: None,
            });
        }
        for o in listing.objects {
            blocks += o.len.div_ceil(512);
            let name = o.key.rsplit('/').next().unwrap_or_default();
            if name.is_empty() {
                continue;
            }
            recs.push(Rec {
                name: name.into(),
                obj: Some(Obj {
                    len: o.len,
                    etag: o.etag.map(String::into_boxed_str),
                    mtime: o.mtime,
                }),
            });
        }
        // Stable: of two entries of one name, the directory (listed first)
        // stays.
        recs.sort_by(|a, b| a.name.cmp(&b.name));
        recs.dedup_by(|later, first| later.name == first.name);
        recs.shrink_to_fit();
        let ended = Instant::now();
        Listed {
            ended,
            took: ended.saturating_duration_since(started),
            blocks,
            recs,
        }
    }

    /// Entries kept.
    pub(super) fn len(&self) -> usize {
        self.recs.len()
    }

    /// Is what it says still trusted? See [`trusted_for`].
    pub(super) fn fresh(&self, ttl: Duration) -> bool {
        self.ended.elapsed() < trusted_for(ttl, self.took)
    }

    /// Did it end after `t`?
    pub(super) fn ended_after(&self, t: Instant) -> bool {
        self.ended >= t
    }

    /// The names in it.
    pub(super) fn names(&self) -> Vec<OsString> {
        self.recs.iter().map(|r| OsString::from(&*r.name)).collect()
    }

    /// Its objects by name, as in directory `dir`.
    pub(super) fn objects(&self, dir: &str) -> HashMap<String, Object> {
        self.recs
            .iter()
            .filter_map(|r| match self.get(dir, &r.name)? {
                Node::Object(o) => Some((r.name.to_string(), o)),
                Node::Dir => None,
            })
            .collect()
    }

    /// What it says of `name` in directory `dir` (`None`: not there).
    pub(super) fn get(&self, dir: &str, name: &str) -> Option<Node> {
        let i = self.recs.binary_search_by(|r| (*r.name).cmp(name)).ok()?;
        Some(match &self.recs[i].obj {
            None => Node::Dir,
            Some(o) => Node::Object(Object {
                key: match dir {
                    "" => name.to_string(),
                    d => format!("{d}/{name}"),
                },
                len: o.len,
                etag: o.etag.as_deref().map(str::to_string),
                mtime: o.mtime,
            }),
        })
    }
}

/// One listing of a directory at a time: a thread that finds one running
/// waits for it and takes its result (its error too), instead of starting
/// another. Holds the last failure.
pub(super) type Gate = Arc<Mutex<Option<Failed>>>;

/// A listing that failed: its error answers the threads that waited for
/// it (a store that is down is not asked again by each of them). A thread
/// that asks after it lists again: the store may be back.
pub(super) struct Failed {
    ended: Instant,
    errno: i32,
}

impl Failed {
    fn new(e: &std::io::Error) -> Failed {
        Failed {
            ended: Instant::now(),
            errno: e.to_errno(),
        }
    }

    /// Does it answer a thread that asked at `asked`?
    fn holds(&self, asked: Instant) -> bool {
        self.ended >= asked
    }
}

impl RemoteTree {
    pub(super) fn remember(&self, key: String, node: Node) {
        let at = Instant::now();
        self.seen.lock().insert(key, Seen { at, node });
    }

    /// Drop what expired listings said, once there is much of it (a
    /// mount that walks a large store keeps only what is still trusted;
    /// the listing just made, of `fresh` entries, stays).
    fn prune(&self, fresh: usize) {
        let ttl = self.ttl;
        let mut seen = self.seen.lock();
        if seen.len() > PRUNE_AT.max(2 * fresh) {
            seen.retain(|_, s| s.at.elapsed() < ttl);
            drop(seen);
            let mut started = self.started.lock();
            started.retain(|_, (_, ended)| ended.elapsed() < ttl);
        }
        let mut listed = self.listed.lock();
        if self.kept.load(Ordering::Relaxed) > PRUNE_AT.max(2 * fresh) {
            listed.retain(|_, l| l.fresh(ttl));
            let n = listed.values().map(|l| l.len()).sum();
            self.kept.store(n, Ordering::Relaxed);
        }
    }

    /// The kept listing of `dir` if it is trusted, or ended after `asked`.
    pub(super) fn kept(&self, dir: &str, asked: Option<Instant>) -> Option<Arc<Listed>> {
        let l = self.listed.lock().get(dir).cloned()?;
        (l.fresh(self.ttl) || asked.is_some_and(|t| l.ended_after(t))).then_some(l)
    }

    /// Keep `listing`, all of directory `dir`, made from `started` on.
    fn keep(&self, dir: &str, listing: Listing, started: Instant) -> Arc<Listed> {
        let l = Arc::new(Listed::new(listing, started));
        let n = l.len();
        let old = self.listed.lock().insert(dir.to_string(), l.clone());
        self.kept.fetch_add(n, Ordering::Relaxed);
        if let Some(old) = old {
            self.kept.fetch_sub(old.len(), Ordering::Relaxed);
        }
        self.prune(n);
        l
    }

    /// Keep `listing` of the root, made from `started` on (the one a
    /// mount makes to check the store), as any listing.
    pub fn keep_root(&self, listing: Listing, started: Instant) {
        self.keep("", listing, started);
    }

    /// The gate of listings of `what`. (Gates no thread holds go once
    /// there are many: a lookup of each of a million names makes one
    /// each.)
    fn gate(&self, what: String) -> Gate {
        let mut gates = self.listing.lock();
        if gates.len() >= PRUNE_AT {
            gates.retain(|_, g| Arc::strong_count(g) > 1);
        }
        gates.entry(what).or_default().clone()
    }

    /// Directory `dir` listed whole: the kept listing while it is trusted;
    /// else the one another thread is making, waited for (its failure
    /// too); else one made now.
    pub(super) fn whole(&self, dir: &str) -> std::io::Result<Arc<Listed>> {
        if let Some(l) = self.kept(dir, None) {
            return Ok(l);
        }
        let asked = Instant::now();
        let gate = self.gate(dir.to_string());
        let mut failed = gate.lock();
        if let Some(l) = self.kept(dir, Some(asked)) {
            return Ok(l);
        }
        if let Some(f) = failed.as_ref().filter(|f| f.holds(asked)) {
            return Err(std::io::Error::from_raw_os_error(f.errno));
        }
        let started = Instant::now();
        match self.remote.list(dir).inspect_err(logged) {
            Ok(listing) => Ok(self.keep(dir, listing, started)),
            Err(e) => {
                *failed = Some(Failed::new(&e));
                Err(e)
            }
        }
    }

    /// List what a lookup in `dir` of a name starting with `start` needs:
    /// `dir` whole if it was listed whole before (it is being walked) or
    /// fits one listing page; else only the names starting with `start`
    /// (one request, not one a thousand entries).
    pub(super) fn list_for(&self, dir: &str, start: Option<&str>) -> std::io::Result<()> {
        let Some(start) = start else {
            return self.whole(dir).map(drop);
        };
        if self.listed.lock().contains_key(dir) {
            return self.whole(dir).map(drop);
        }
        if !self.big.lock().contains(dir) && self.relist_page(dir)? {
            return Ok(());
        }
        if self.relist_start(dir, start)? {
            return Ok(());
        }
        self.whole(dir).map(drop)
    }

    /// List `dir` whole if one page holds it (unless another thread did):
    /// false, and `dir` remembered as big, if it does not or the store
    /// cannot tell.
    fn relist_page(&self, dir: &str) -> std::io::Result<bool> {
        let asked = Instant::now();
        let gate = self.gate(dir.to_string());
        let _one = gate.lock();
        if self.kept(dir, Some(asked)).is_some() {
            return Ok(true);
        }
        let started = Instant::now();
        let Some(listing) = self.remote.list_start(dir, "").inspect_err(logged)? else {
            let mut big = self.big.lock();
            if big.len() >= PRUNE_AT {
                big.clear();
            }
            big.insert(dir.to_string());
            return Ok(false);
        };
        self.keep(dir, listing, started);
        Ok(true)
    }

    /// When the listing of the names of `dir` starting with `start` that
    /// is still trusted (or ended after `asked`) started.
    pub(super) fn started_since(
        &self,
        dir: &str,
        start: &str,
        asked: Option<Instant>,
    ) -> Option<Instant> {
        let key = (dir.to_string(), start.to_string());
        let (began, ended) = *self.started.lock().get(&key)?;
        (ended.elapsed() < self.ttl || asked.is_some_and(|t| ended >= t)).then_some(began)
    }

    /// List the names of `dir` starting with `start`, unless another thread
    /// did: false if the store cannot tell them apart from the rest (list
    /// `dir` whole then).
    fn relist_start(&self, dir: &str, start: &str) -> std::io::Result<bool> {
        let asked = Instant::now();
        let gate = self.gate(format!("{dir}\n{start}"));
        let _one = gate.lock();
        if self.started_since(dir, start, Some(asked)).is_some() {
            return Ok(true);
        }
        let began = Instant::now();
        let Some(listing) = self.remote.list_start(dir, start).inspect_err(logged)? else {
            return Ok(false);
        };
        let n = self.remember_listing(dir, listing);
        let key = (dir.to_string(), start.to_string());
        let mut started = self.started.lock();
        if started.len() >= PRUNE_AT {
            started.retain(|_, (_, ended)| ended.elapsed() < self.ttl);
        }
        started.insert(key, (began, Instant::now()));
        drop(started);
        self.prune(n);
        Ok(true)
    }

    /// Remember what `listing` of directory `key` says of each entry: how
    /// many entries.
    fn remember_listing(&self, key: &str, listing: Listing) -> usize {
        let child = |name: &str| match key {
            "" => name.to_string(),
            k => format!("{k}/{name}"),
        };
        let mut n = 0;
        for d in listing.dirs {
            self.remember(child(&d), Node::Dir);
            n += 1;
        }
        for o in listing.objects {
            let Some(name) = o.key.rsplit('/').next().map(str::to_string) else {
                continue;
            };
            // An object named like its directory ("a/" kept as a marker)
            // is not an entry.
            if name.is_empty() {
                continue;
            }
            self.remember(child(&name), Node::Object(o));
            n += 1;
        }
        n
    }
}
