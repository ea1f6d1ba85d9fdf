//! Probing: which sources are containers (by their first bytes), cached
//! per source identity.

use super::*;

/// Probe results per source inode, valid while the stamp matches.
#[derive(Default)]
pub(super) struct Probes {
    map: Mutex<HashMap<u64, (Stamp, Option<Probe>)>>,
    /// Files probed (read to see whether they are containers).
    run: AtomicU64,
}

impl Probes {
    /// How many files were probed so far.
    pub(super) fn run(&self) -> u64 {
        self.run.load(Ordering::Relaxed)
    }

    /// The probe of source `key` cached at `stamp`, if any.
    fn get(&self, key: u64, stamp: Stamp) -> Option<Option<Probe>> {
        match self.map.lock().get(&key) {
            Some((s, p)) if *s == stamp => Some(p.clone()),
            _ => None,
        }
    }

    fn insert(&self, key: u64, stamp: Stamp, p: Option<Probe>) {
        insert_capped(&mut self.map.lock(), key, (stamp, p));
    }
}

impl Fs {
    /// Is this source a container? Cheap (the first bytes), cached per
    /// (inode, size, mtime, ctime). A source that then fails to open stays
    /// listed as its probe says (its opens fail): its name and size never
    /// change while the file does not. Out of file descriptors (after
    /// releasing idle ones), it fails with `EMFILE` or `ENFILE` and nothing
    /// is cached: the file is not taken for a plain one for good.
    pub(super) fn probe(&self, path: &Path, md: &Meta) -> Result<Option<Probe>, Error> {
        if md.is_file() && md.len < detect::MIN_LEN
            || md.is_dir() && self.tree.never_container(path)
        {
            return Ok(None);
        }
        let Some(stamp) = self.stamp_of(path, md) else {
            return Ok(None);
        };
        let key = self.ino_for(md);
        if let Some(p) = self.probes.get(key, stamp) {
            return Ok(p);
        }
        self.probes.run.fetch_add(1, Ordering::Relaxed);
        let probed = self.with_fds(|| match self.tree.probe(path, md) {
            Err(e) if e.kind == blosc_decode::ErrorKind::Io && error::out_of_fds(e.errno()) => {
                Err(Error::from(e))
            }
            r => Ok(r),
        })?;
        let p = match probed {
            Ok(p) => p,
            // A file refused by the rules for links (`srcdir`), or a
            // failing disk: worth a line.
            Err(e) if error::names_eio(&e) => {
                self.warn_once(
                    &format!("probe:{}:{stamp:?}", path.display()),
                    &format!("{e} (not presented as a container)"),
                );
                None
            }
            Err(e)
                if matches!(
                    e.kind,
                    blosc_decode::ErrorKind::Io | blosc_decode::ErrorKind::Changed
                ) =>
            {
                log::debug!("{}: cannot probe: {e}", path.display());
                None
            }
            Err(e) => {
                self.warn_once(
                    &format!("probe:{}:{stamp:?}", path.display()),
                    &format!("{e} (looks like a Blosc container but is not readable as one: passed through as raw bytes)"),
                );
                None
            }
        };
        self.probes.insert(key, stamp, p.clone());
        Ok(p)
    }

    /// Run `f`; if it ran out of file descriptors, release those of idle
    /// containers and run it once more.
    pub(super) fn with_fds<T>(&self, mut f: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
        match f() {
            Err(e) if e.out_of_fds() => {
                let n = self.containers.drop_idle(|_| true);
                self.warn_once(
                    "fds-exhausted",
                    &format!("out of file descriptors ({}): closed {n} idle containers and retried (raise the limit, ulimit -n, to keep more open; further shortages are not logged)", e),
                );
                f()
            }
            r => r,
        }
    }

    /// What a source entry is presented as.
    /// (Fails only when out of file descriptors: `EMFILE`, `ENFILE`.)
    pub(super) fn classify(&self, path: &Path, md: &Meta) -> Result<Shown, Error> {
        Ok(if md.is_symlink() {
            Shown::Symlink
        } else if md.is_dir() {
            match self.probe(path, md)? {
                Some(p) => Shown::Container(p),
                None => Shown::Dir,
            }
        } else {
            match self.probe(path, md)? {
                Some(p) => Shown::Container(p),
                None => Shown::Plain,
            }
        })
    }
}
