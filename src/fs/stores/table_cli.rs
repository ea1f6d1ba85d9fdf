//! `bloscfs cat` and `bloscfs info` of a CTable's `table.npy` (see
//! [`super::ctable`]), read as the mount reads it.

use super::ctable::TABLE_NAME;
use crate::fs::{LocalTree, SourceTree, StoreTree};
use blosc_decode::container::Env;
use blosc_decode::open::ctable::{CTable, META_KEY};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The table whose `table.npy` `path` names, if it names one
/// (`Err`: it does, but the table does not open).
pub fn table_at(path: &Path) -> Option<Result<Arc<CTable>, String>> {
    if path.file_name()? != TABLE_NAME || path.exists() {
        return None;
    }
    let abs = std::path::absolute(path).ok()?;
    let dir = abs.parent()?;
    if !super::ctable::table_like(dir) {
        return None;
    }
    let local = Arc::new(LocalTree::new(PathBuf::from("/")));
    let env = Env::new(64 << 20);
    let tree = StoreTree::new(local, env.clone());
    tree.stat(&dir.join(META_KEY)).ok()?;
    Some(match super::ctable::open(&tree, &env, dir) {
        Ok(Some(t)) => Ok(Arc::new(t)),
        Ok(None) => Err(format!(
            "{}: no table: {} is not a CTable's",
            path.display(),
            META_KEY
        )),
        Err(e) => Err(format!("{}: no table: {e}", path.display())),
    })
}

/// Write bytes `offset..offset + length` of the table's `.npy` to stdout.
pub fn cat(t: Arc<CTable>, path: &Path, offset: u64, length: Option<u64>) -> Result<(), String> {
    crate::cli::write_window(offset, length, t.len(), |at, buf| {
        t.read_at(at, buf)
            .map_err(|e| format!("{}: {e}", path.display()))
    })
}

/// `bloscfs info` of the table.
pub fn info(t: Arc<CTable>, path: &Path) -> String {
    format!("{}: {}", path.display(), t.describe())
}
