//! Listings: the presented entries of a source directory, built by
//! reading and probing it, cached until it changes.

use super::*;

/// The listings built, per directory inode.
#[derive(Default)]
pub(super) struct Listings {
    map: Mutex<HashMap<u64, Arc<DirListing>>>,
    /// Listings built from the source (tests: how often a directory is read).
    built: AtomicU64,
}

impl Listings {
    /// Drop the listing of `ino` (the next one is built afresh).
    pub(super) fn remove(&self, ino: u64) {
        self.map.lock().remove(&ino);
    }

    /// How many listings were built from the source so far.
    pub(super) fn built(&self) -> u64 {
        self.built.load(Ordering::Relaxed)
    }
}

/// A source name with what it is presented as and its metadata.
type Entered = (OsString, (Shown, Meta));

/// One entry of a listing.
pub(super) struct Entry {
    /// The name it is presented under.
    pub(super) shown: OsString,
    /// Its name in the source directory.
    pub(super) source: OsString,
    pub(super) what: Shown,
    /// Its source metadata when the listing was built.
    pub(super) md: Meta,
}

pub(super) struct DirListing {
    stamp: Stamp,
    /// Sorted by source name.
    pub(super) entries: Vec<Entry>,
    /// Indices of `entries` in the order of their presented names.
    by_name: Vec<u32>,
    built: Instant,
}

impl DirListing {
    /// The entry presented as `name`.
    pub(super) fn find(&self, name: &OsStr) -> Option<&Entry> {
        let i = self
            .by_name
            .binary_search_by(|&i| self.entries[i as usize].shown.as_os_str().cmp(name))
            .ok()?;
        Some(&self.entries[self.by_name[i] as usize])
    }
}

/// A listing is rebuilt when its directory changes, and at the latest after
/// this long (files rewritten in place do not change the directory; probes
/// of unchanged files are cached, so a rebuild costs one stat per entry).
const LISTING_TTL: Duration = Duration::from_secs(1);

impl Fs {
    /// The presented listing of directory `ino` (cached until the source
    /// directory changes).
    pub(super) fn listing(&self, ino: u64) -> Result<Arc<DirListing>, Error> {
        let path = self.path_of(ino)?;
        let (stamp, cached) = self.cached_listing(ino, &path)?;
        if let Some(l) = cached {
            return Ok(l);
        }
        // The stale listing goes before its successor is built: two of a
        // large directory's listings would double the daemon's memory.
        self.listings.remove(ino);
        self.listings.built.fetch_add(1, Ordering::Relaxed);
        let found = self.with_fds(|| self.tree.list(&path).map_err(Error::from))?;
        let mut raw = self.stat_all(&path, found)?;
        raw.sort_by(|a, b| a.0.cmp(&b.0));
        let entries: Vec<_> = names::assign(raw, |(w, _)| naming(w))
            .into_iter()
            .map(|(shown, source, (what, md))| Entry {
                shown,
                source,
                what,
                md,
            })
            .collect();
        let mut by_name: Vec<u32> = (0..entries.len() as u32).collect();
        by_name
            .sort_unstable_by(|&a, &b| entries[a as usize].shown.cmp(&entries[b as usize].shown));
        let l = Arc::new(DirListing {
            stamp,
            built: Instant::now(),
            entries,
            by_name,
        });
        self.listings.map.lock().insert(ino, l.clone());
        Ok(l)
    }

    /// Each of the names `found` in `dir` with what it is presented as
    /// and its metadata (names gone since they were listed left out).
    /// Probing reads the first bytes of every file: on a cold cache that is
    /// I/O-bound, so it is spread over threads (as many as the tree says).
    /// Each thread takes its share of the names, and their results join
    /// one vector one share at a time: a directory of a million entries is
    /// not held twice.
    fn stat_all(&self, dir: &Path, mut found: Vec<OsString>) -> Result<Vec<Entered>, Error> {
        let workers = self.tree.listing_workers(found.len());
        let per = found.len().div_ceil(workers).max(1);
        let mut parts = Vec::with_capacity(workers);
        while found.len() > per {
            parts.push(found.split_off(found.len() - per));
        }
        parts.push(found);
        let total = parts.iter().map(Vec::len).sum();
        std::thread::scope(|sc| {
            let hs: Vec<_> = parts
                .into_iter()
                .map(|part| sc.spawn(move || self.stat_part(dir, part)))
                .collect();
            let mut all = Vec::with_capacity(total);
            for h in hs {
                all.extend(h.join().unwrap_or(Err(Error::io()))?);
            }
            Ok(all)
        })
    }

    /// [`Fs::stat_all`] of one share of the names.
    fn stat_part(&self, dir: &Path, part: Vec<OsString>) -> Result<Vec<Entered>, Error> {
        let mut out = Vec::with_capacity(part.len());
        for name in part {
            let p = &dir.join(&name);
            // Gone between the listing and its stat: not an entry. Any
            // other failure fails the listing (a store that died while
            // listed gives EIO, not a directory missing entries).
            let md = match self.tree.stat(p).map_err(Error::from) {
                Ok(md) => md,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
            if !presented(&md) {
                continue;
            }
            let what = self.classify(p, &md)?;
            out.push((name, (what, md)));
        }
        Ok(out)
    }

    /// The listing of directory `ino` at `path` if one is cached and still
    /// valid, with the directory's current stamp.
    pub(super) fn cached_listing(
        &self,
        ino: u64,
        path: &Path,
    ) -> Result<(Stamp, Option<Arc<DirListing>>), Error> {
        // A directory renamed or replaced since the kernel looked it up
        // under this path: its names must not be looked up in whatever
        // directory holds the path now.
        let dmd = self.source_md(ino, path)?;
        let stamp = dmd.stamp();
        let l = self.listings.map.lock().get(&ino).cloned();
        Ok((
            stamp,
            l.filter(|l| l.stamp == stamp && l.built.elapsed() < LISTING_TTL),
        ))
    }
}
