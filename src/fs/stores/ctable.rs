//! python-blosc2's CTables: a `.b2d` directory or `.b2z` store whose
//! `_meta.b2f` says `kind: ctable` gains [`TABLE_NAME`], one structured
//! `.npy` of the table's valid rows (deleted rows left out, fields in
//! schema order: what `numpy.asarray(table)` gives), read through
//! [`blosc_decode::open::ctable::CTable`] from the columns' containers.
//! The columns themselves stay shown as they are stored
//! (`_cols/NAME.npy`, of the table's full capacity).
//!
//! The name: python-blosc2 writes only `_`-prefixed keys (`_meta`,
//! `_valid_rows`, `_cols/..`, `_indexes/..`) and `embed.b2e` at a table's
//! top, so `table.npy` meets none of them; a table whose top holds any
//! entry named `table` or `table.*` all the same is not given one. A table
//! that does not open (a lying schema, a column of another length) gets
//! no `table.npy`, with a log line; its columns are still shown.

use super::super::source_tree::{lseek_whole, EntryKind, Meta, RawFile, SourceTree};
use blosc_decode::container::Env;
use blosc_decode::io::Stamp;
use blosc_decode::open::ctable::{CTable, MASK_KEY, META_KEY};
use blosc_decode::Error;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The name of a table's `.npy` in its directory.
pub const TABLE_NAME: &str = "table.npy";

/// Tables kept open, at most (the map is emptied past it).
const MAX_KEPT: usize = 64;

/// A table's stamp: its description's and its mask's.
type Stamps = (Stamp, Stamp);
/// A table read at its stamps (`None`: not a table, or one that does not
/// open).
type Kept = (Stamps, Option<Arc<CTable>>);

/// Tables read, by the path of their directory.
#[derive(Default)]
pub struct Tables {
    kept: Mutex<HashMap<PathBuf, Kept>>,
}

/// Can `dir` be a table's directory, by its name?
pub(super) fn table_like(dir: &Path) -> bool {
    let name = dir.as_os_str().as_encoded_bytes();
    name.ends_with(b".b2d") || name.ends_with(b".b2z")
}

/// Does a name in a table's directory take [`TABLE_NAME`]?
fn takes_name(name: &OsString) -> bool {
    let n = name.as_encoded_bytes();
    n == b"table" || n.starts_with(b"table.")
}

impl Tables {
    /// The table at directory `dir` of `tree`, if it is one that opens.
    pub fn at(&self, tree: &dyn SourceTree, env: &Env, dir: &Path) -> Option<Arc<CTable>> {
        if !table_like(dir) {
            return None;
        }
        let stat = |k: &str| tree.stat(&dir.join(k)).ok().filter(Meta::is_file);
        let stamps = (stat(META_KEY)?.stamp(), stat(MASK_KEY)?.stamp());
        if let Some((s, t)) = self.kept.lock().get(dir) {
            if *s == stamps {
                return t.clone();
            }
        }
        let t = match open(tree, env, dir) {
            Ok(t) => t.map(Arc::new),
            Err(e) => {
                log::warn!(
                    "{}: CTable not presented as {TABLE_NAME}: {e}",
                    dir.display()
                );
                None
            }
        };
        let mut kept = self.kept.lock();
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert(dir.to_path_buf(), (stamps, t.clone()));
        t
    }

    /// The table `path` (a `table.npy`) stands for, given the stored
    /// entries of its directory.
    pub fn of(
        &self,
        tree: &dyn SourceTree,
        env: &Env,
        path: &Path,
        names: &[OsString],
    ) -> Option<Arc<CTable>> {
        if path.file_name()? != TABLE_NAME {
            return None;
        }
        let dir = path.parent()?;
        match names.iter().any(takes_name) {
            true => None,
            false => self.at(tree, env, dir),
        }
    }

    /// The name to add to `names`, the entries of `dir`, if any.
    pub fn name_in(
        &self,
        tree: &dyn SourceTree,
        env: &Env,
        dir: &Path,
        names: &[OsString],
    ) -> Option<OsString> {
        if !table_like(dir) || names.iter().any(takes_name) {
            return None;
        }
        self.at(tree, env, dir).map(|_| OsString::from(TABLE_NAME))
    }
}

/// Open the table in `dir` through `tree`.
/// `None`: its `_meta.b2f` is not a CTable's.
pub(super) fn open(
    tree: &dyn SourceTree,
    env: &Env,
    dir: &Path,
) -> blosc_decode::Result<Option<CTable>> {
    CTable::open(&|key| {
        let path = dir.join(key);
        let md = tree
            .stat(&path)
            .map_err(|e| Error::from(e).in_file(&path))?;
        tree.open_container(&path, &md, env)?
            .ok_or_else(|| Error::corrupt("not a Blosc container").in_file(&path))
    })
}

/// The metadata of a table's `.npy`: its directory's owner and times, read
/// permissions only, its own inode number and length. Not pinned: the
/// columns may change underneath.
pub fn table_meta(dir_md: &Meta, t: &CTable) -> Meta {
    let mut md = dir_md.clone();
    md.kind = EntryKind::File;
    md.mode = libc::S_IFREG | (dir_md.mode & 0o444);
    md.len = t.len();
    md.nlink = 1;
    md.blocks = md.len.div_ceil(512);
    md.ino = super::store::mix(dir_md.ino, TABLE_NAME.as_bytes());
    md.pinned = false;
    md
}

/// An open table `.npy`.
pub struct TableFile {
    pub table: Arc<CTable>,
    pub meta: Meta,
    pub path: PathBuf,
}

impl RawFile for TableFile {
    fn meta(&self) -> std::io::Result<Meta> {
        Ok(self.meta.clone())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.table.read_at(offset, buf).map_err(|e| {
            log::warn!("{}: {e}", self.path.display());
            std::io::Error::from_raw_os_error(e.errno())
        })
    }

    fn lseek(&self, offset: i64, whence: i32) -> Result<i64, crate::fs::Error> {
        lseek_whole(self.table.len(), offset, whence)
    }
}
