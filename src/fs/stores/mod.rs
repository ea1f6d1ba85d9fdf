//! python-blosc2's stores as directories: [`StoreTree`] wraps the source
//! tree and presents
//! - each `.b2z` file that is a zip archive as a directory of its members
//!   (`grp/b.b2nd` is the file `b.b2nd` in the directory `grp`), a member's
//!   bytes read in place, at their offset in the archive;
//! - each `.b2e` file that is an EmbedStore as a directory of its keys
//!   (`/grp/c` is the file `c` in the directory `grp`), a key's frame read
//!   through the store's decoded content;
//! - in a `.b2d` directory holding an `embed.b2e` (a DictStore's), and in a
//!   `.b2z` holding one, the keys of that `embed.b2e` beside the external
//!   leaves, where their keys put them; an external leaf (`c.b2nd`, `c.b2f`,
//!   `c.b2b`, or any entry named `c`) wins over an embedded `/c`, as in
//!   python-blosc2. The `embed.b2e` itself is not shown once its keys are.
//!
//! The presented tree then names and opens these files like any other
//! (`b.b2nd` is shown as `b.npy`, an embedded NDArray `c` as `c.npy`). A
//! member not stored as its own bytes is listed, and its opens fail (EIO)
//! with a log line; a store that cannot be read passes through as a file
//! (or as its plain directory), with a log line.

mod ctable;
mod store;
pub mod table_cli;

use super::source_tree::{open_by_stat, Meta, RawFile, SourceTree};
use super::wrapped::WrappedTree;
use super::Error;
use blosc_decode::container::{Container, Env};
use blosc_decode::detect::{self, Probe};
use blosc_decode::io::{First, Source, Stamp};
use blosc_decode::open::ctable::CTable;
use blosc_decode::open::embed::{self, Leaf as EmbeddedLeaf};
use blosc_decode::open::store as zip_store;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use store::{external_names, Leaf, Node, Store, EMBED_NAME};

/// The suffix of zipped stores, presented as directories.
const ZIP_SUFFIX: &[u8] = b".b2z";
/// The suffix of EmbedStores, presented as directories.
const EMBED_SUFFIX: &[u8] = b".b2e";
/// The suffix of DictStore directories, whose `embed.b2e` keys are shown
/// inside them.
const DICT_SUFFIX: &[u8] = b".b2d";

/// Stores kept parsed, at most (the map is emptied past it).
const MAX_KEPT: usize = 1024;

/// A store read at a version of its file (`None`: not a readable store,
/// passed through).
type Kept = (Stamp, Option<Arc<Store>>);

/// A path in or at a store.
struct Located {
    /// The store's path (the `.b2z`, `.b2e` or `.b2d`).
    at: PathBuf,
    store: Arc<Store>,
    /// The path inside the store.
    rel: PathBuf,
    /// Does the source tree hold a directory at `at` (a `.b2d`), whose
    /// own entries come first?
    overlay: bool,
}

/// The source tree with python-blosc2's stores shown as directories.
pub struct StoreTree {
    inner: Arc<dyn SourceTree>,
    /// What embedded stores are opened with (their content is decoded).
    env: Env,
    /// Parsed stores by the path of the file read.
    kept: Mutex<HashMap<PathBuf, Kept>>,
    /// CTables read.
    tables: ctable::Tables,
}

fn enoent() -> std::io::Error {
    std::io::Error::from(Error::not_found())
}

impl StoreTree {
    pub fn new(inner: Arc<dyn SourceTree>, env: Env) -> StoreTree {
        StoreTree {
            inner,
            env,
            kept: Mutex::new(HashMap::new()),
            tables: ctable::Tables::default(),
        }
    }

    /// The store `path` leads into, with the path inside it; `None` for a
    /// path that is not in a store (nor a store itself).
    fn locate(&self, path: &Path) -> Option<Located> {
        let rel = path.strip_prefix(self.inner.root()).ok()?;
        let mut at = self.inner.root().to_path_buf();
        let mut parts = rel.components();
        while let Some(c) = parts.next() {
            at.push(c);
            let name = c.as_os_str().as_bytes();
            let found = if name.ends_with(ZIP_SUFFIX) || name.ends_with(EMBED_SUFFIX) {
                Some((self.kept_store(&at, &at)?, false))
            } else if name.ends_with(DICT_SUFFIX) {
                self.kept_store(&at.join(EMBED_NAME), &at)
                    .map(|s| (s, true))
            } else {
                None
            };
            if let Some((store, overlay)) = found {
                let rel = parts.as_path().to_path_buf();
                return Some(Located {
                    at,
                    store,
                    rel,
                    overlay,
                });
            }
        }
        None
    }

    /// The store read from the file at `file`, once per version (`at`: the
    /// store's path).
    fn kept_store(&self, file: &Path, at: &Path) -> Option<Arc<Store>> {
        let md = self.inner.stat(file).ok().filter(Meta::is_file)?;
        let stamp = md.stamp();
        if let Some((s, st)) = self.kept.lock().get(file) {
            if *s == stamp {
                return st.clone();
            }
        }
        let st = match self.read_store(file, at, md) {
            Ok(s) => Some(Arc::new(s)),
            Err(e) => {
                log::warn!(
                    "{}: not read as a store ({e}): passed through",
                    file.display()
                );
                None
            }
        };
        let mut kept = self.kept.lock();
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert(file.to_path_buf(), (stamp, st.clone()));
        st
    }

    /// Read the store in the file `file` (of metadata `md`).
    fn read_store(&self, file: &Path, at: &Path, md: Meta) -> blosc_decode::Result<Store> {
        let src = self.inner.open_source(file, &md)?;
        let mut s = Store::new(md);
        if file != at || file.as_os_str().as_bytes().ends_with(EMBED_SUFFIX) {
            s.add_embedded(embed::open(src, file, &self.env)?, file);
            return Ok(s);
        }
        let members = zip_store::members(src.as_ref())?;
        let own = members
            .iter()
            .find(|m| m.name == EMBED_NAME.as_bytes())
            .cloned();
        s.add_members(members, file);
        if let Some(m) = own {
            let inside = file.join(EMBED_NAME);
            match zip_store::member_source(src, &m, file)
                .and_then(|w| embed::open(Arc::new(w), &inside, &self.env))
            {
                Ok(e) => {
                    s.hide(Path::new(EMBED_NAME));
                    s.add_embedded(e, &inside);
                }
                Err(e) => log::warn!(
                    "{}: not read as a store ({e}): shown as a file",
                    inside.display()
                ),
            }
        }
        Ok(s)
    }

    /// Is `path` one the source tree holds itself, or would hold an
    /// external leaf for?
    fn real(&self, path: &Path) -> bool {
        self.inner.stat(path).is_ok()
            || external_names(path)
                .iter()
                .any(|p| self.inner.stat(p).is_ok_and(|m| m.is_file()))
    }

    /// The store's node at `path`, where the source tree holds nothing.
    fn virtual_node(&self, path: &Path) -> Option<(Located, Node)> {
        let l = self.locate(path)?;
        let node = l.store.node(&l.rel)?;
        if l.overlay && (l.rel.as_os_str().is_empty() || self.real(path)) {
            return None;
        }
        Some((l, node))
    }

    /// Is `path` a `.b2d`'s `embed.b2e` whose keys are shown instead?
    fn hidden(&self, l: &Located) -> bool {
        l.overlay && l.rel == Path::new(EMBED_NAME)
    }

    /// The leaf at `path`: its bytes as a source, and its metadata;
    /// `Ok(None)` for a path that is not a store's leaf.
    fn leaf(&self, path: &Path) -> blosc_decode::Result<Option<(Arc<dyn Source>, Meta)>> {
        let Some((l, Node::File(i))) = self.virtual_node(path) else {
            return Ok(None);
        };
        let src: Arc<dyn Source> = match &l.store.leaves[i] {
            Leaf::Member(m) => {
                let archive = self.inner.open_source(&l.at, &l.store.meta)?;
                Arc::new(zip_store::member_source(archive, m, &l.at)?)
            }
            Leaf::Embedded(e) => {
                let es = l
                    .store
                    .embed
                    .as_ref()
                    .expect("embedded leaves have a store");
                let entry = &es.entries[*e];
                Arc::new(EmbeddedLeaf::new(
                    es.store.clone(),
                    entry,
                    path.to_path_buf(),
                ))
            }
        };
        Ok(Some((src, l.store.meta_of(&l.rel, &Node::File(i)))))
    }

    /// The metadata of a path in a store (the store itself a directory);
    /// `None` where the source tree answers.
    fn virtual_stat(&self, path: &Path) -> Option<std::io::Result<Meta>> {
        let l = self.locate(path)?;
        if l.overlay {
            if self.hidden(&l) {
                return Some(Err(enoent()));
            }
            let (l, n) = self.virtual_node(path)?;
            return Some(Ok(l.store.meta_of(&l.rel, &n)));
        }
        Some(match l.store.node(&l.rel) {
            Some(n) => Ok(l.store.meta_of(&l.rel, &n)),
            None => Err(enoent()),
        })
    }

    /// Does the store answer for `path` (rather than the source tree)?
    fn answers(&self, path: &Path) -> bool {
        match self.locate(path) {
            Some(l) if l.overlay => self.virtual_node(path).is_some(),
            Some(_) => true,
            None => false,
        }
    }

    /// A `.b2d` directory's entries: the source tree's, then the store's
    /// that nothing there hides.
    fn list_overlay(&self, dir: &Path, l: &Located) -> std::io::Result<Vec<OsString>> {
        let keys = l.store.dirs.get(&l.rel);
        let mut names = match self.inner.list(dir) {
            Ok(n) => n,
            Err(_) if keys.is_some() && !self.real(dir) => Vec::new(),
            Err(e) => return Err(e),
        };
        if l.rel.as_os_str().is_empty() {
            names.retain(|n| n != EMBED_NAME);
        }
        let real: HashSet<OsString> = names.iter().cloned().collect();
        for k in keys.into_iter().flatten() {
            let hides = |p: &PathBuf| real.contains(p.as_os_str());
            if !real.contains(k) && !external_names(Path::new(k)).iter().any(hides) {
                names.push(k.clone());
            }
        }
        Ok(names)
    }
    /// A directory's entries as stored (without a table's `.npy`).
    fn list_stored(&self, dir: &Path) -> std::io::Result<Vec<OsString>> {
        match self.locate(dir) {
            Some(l) if l.overlay => self.list_overlay(dir, &l),
            Some(l) => l
                .store
                .dirs
                .get(&l.rel)
                .map(|names| names.iter().cloned().collect())
                .ok_or_else(|| std::io::Error::from(Error::not_dir())),
            None => self.inner.list(dir),
        }
    }

    /// The metadata of what is stored at `path`.
    fn stat_stored(&self, path: &Path) -> std::io::Result<Meta> {
        self.virtual_stat(path)
            .unwrap_or_else(|| self.inner.stat(path))
    }

    /// `md`, or where nothing is stored at `path`, a table's `.npy`'s.
    fn or_table(&self, path: &Path, md: std::io::Result<Meta>) -> std::io::Result<Meta> {
        match md {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match self.table_of(path) {
                Some((_, md)) => Ok(md),
                None => Err(e),
            },
            r => r,
        }
    }

    /// The CTable whose `.npy` `path` is, with that file's metadata.
    fn table_of(&self, path: &Path) -> Option<(Arc<CTable>, Meta)> {
        let dir = path.parent()?;
        if path.file_name()? != ctable::TABLE_NAME
            || !ctable::table_like(dir)
            || self.stat_stored(path).is_ok()
        {
            return None;
        }
        let dir_md = self.stat_stored(dir).ok().filter(Meta::is_dir)?;
        let names = self.list_stored(dir).ok()?;
        let t = self.tables.of(self, &self.env, path, &names)?;
        let md = ctable::table_meta(&dir_md, &t);
        Some((t, md))
    }
}

/// A leaf read as its raw bytes.
struct LeafFile {
    src: Arc<dyn Source>,
    meta: Meta,
}

impl RawFile for LeafFile {
    fn meta(&self) -> std::io::Result<Meta> {
        Ok(self.meta.clone())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        super::source_tree::read_clipped(self.src.as_ref(), buf, offset)
    }

    fn lseek(&self, offset: i64, whence: i32) -> Result<i64, Error> {
        super::source_tree::lseek_whole(self.src.len(), offset, whence)
    }
}

impl WrappedTree for StoreTree {
    fn inner(&self) -> &dyn SourceTree {
        &*self.inner
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<OsString>> {
        let mut names = self.list_stored(dir)?;
        names.extend(self.tables.name_in(self, &self.env, dir, &names));
        Ok(names)
    }

    fn stat(&self, path: &Path) -> std::io::Result<Meta> {
        self.or_table(path, self.stat_stored(path))
    }

    fn stat_follow(&self, path: &Path) -> std::io::Result<Meta> {
        let md = self
            .virtual_stat(path)
            .unwrap_or_else(|| self.inner.stat_follow(path));
        self.or_table(path, md)
    }

    fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
        match self.answers(path) {
            true => Err(std::io::Error::from(Error::invalid())),
            false => self.inner.read_link(path),
        }
    }

    fn probe(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Option<Probe>> {
        if self.table_of(path).is_some() {
            return Ok(None);
        }
        if !self.answers(path) {
            return self.inner.probe(path, meta);
        }
        match self.leaf(path) {
            Ok(Some((src, _))) => detect::probe_source(src, path),
            // Not a leaf (a directory), or one not stored: not a
            // container (its opens say why).
            Ok(None) | Err(_) => Ok(None),
        }
    }

    fn open_container(
        &self,
        path: &Path,
        meta: &Meta,
        env: &Env,
    ) -> blosc_decode::Result<Option<Container>> {
        if self.table_of(path).is_some() {
            return Ok(None);
        }
        if !self.answers(path) {
            return self.inner.open_container(path, meta, env);
        }
        match self.leaf(path)? {
            Some((src, _)) => blosc_decode::open::open_source(src, path, env),
            None => Ok(None),
        }
    }

    fn open_plain(&self, path: &Path) -> std::io::Result<(Box<dyn RawFile>, Meta)> {
        if let Some((table, meta)) = self.table_of(path) {
            let path = path.to_path_buf();
            let file = ctable::TableFile { table, meta, path };
            let meta = file.meta.clone();
            return Ok((Box::new(file), meta));
        }
        if !self.answers(path) {
            return self.inner.open_plain(path);
        }
        match self.leaf(path) {
            Ok(Some((src, meta))) => Ok((
                Box::new(LeafFile {
                    src,
                    meta: meta.clone(),
                }),
                meta,
            )),
            Ok(None) => Err(std::io::Error::from(Error::is_dir())),
            Err(e) => {
                log::warn!("{}: {e}", path.display());
                Err(std::io::Error::from_raw_os_error(e.errno()))
            }
        }
    }

    fn open_source(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Arc<dyn Source>> {
        match self.leaf(path)? {
            Some((src, _)) => Ok(src),
            None => self.inner.open_source(path, meta),
        }
    }

    fn dir_container_access(&self, path: &Path, meta: &Meta) -> (u16, u64) {
        match self.answers(path) {
            true => (0, 0),
            false => self.inner.dir_container_access(path, meta),
        }
    }

    /// A file of the source tree is asked of it; one inside a store is
    /// looked up.
    fn open_file(
        &self,
        path: &Path,
        first: First,
    ) -> blosc_decode::Result<Option<Arc<dyn Source>>> {
        match self.locate(path) {
            Some(_) => open_by_stat(self, path),
            None => self.inner.open_file(path, first),
        }
    }
}
