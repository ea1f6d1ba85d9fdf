//! python-blosc2's EmbedStore (`.b2e`): its keys, and each key's frame
//! read as a source of its own ([`Leaf`]) through the store's container,
//! so the store's decoded blocks go through the block cache like any
//! other's and a leaf never sits whole in memory.

use crate::container::{Container, Env};
use crate::deferred::Deferred;
use crate::error::{Error, Result};
use crate::format::embed::{self, Entry};
use crate::io::Source;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An EmbedStore opened: its content and the keys with bytes in it.
pub struct EmbedStore {
    /// The store's super-chunk, its content the leaves' frames.
    pub store: Arc<Container>,
    /// The keys whose frames lie inside the content, in the map's order.
    pub entries: Vec<Entry>,
}

/// Open the EmbedStore `src` (`path` names it in messages): a frame with
/// an `estore_metadata` vlmetalayer. Entries reaching past the content are
/// left out, with a log line; keys of remote references are logged.
pub fn open(src: Arc<dyn Source>, path: &Path, env: &Env) -> Result<EmbedStore> {
    let c = super::open_source(src, path, env)?
        .ok_or_else(|| Error::unsupported("not a Blosc2 frame").in_file(path))?;
    let (_, value) = c
        .info()
        .vlmetalayers
        .iter()
        .find(|(n, _)| n == embed::VLMETA)
        .ok_or_else(|| {
            Error::unsupported(format!("no {} vlmetalayer", embed::VLMETA)).in_file(path)
        })?;
    let map = embed::parse(value).map_err(|e| e.in_file(path))?;
    for r in &map.references {
        log::info!(
            "{}: {r} is a reference to a remote array: not presented",
            path.display()
        );
    }
    let len = c.raw_len();
    let entries = map
        .entries
        .into_iter()
        .filter(|e| {
            let inside = e.offset + e.length <= len;
            if !inside {
                log::warn!(
                    "{}: {}: {} bytes at {} run past the store's {len}: not presented",
                    path.display(),
                    e.key,
                    e.length,
                    e.offset
                );
            }
            inside
        })
        .collect();
    Ok(EmbedStore {
        store: Arc::new(c),
        entries,
    })
}

/// One key's frame: `len` bytes of the store's content from `start`.
pub struct Leaf {
    store: Arc<Container>,
    start: u64,
    len: u64,
    /// The path messages name (the store's path with the key).
    path: PathBuf,
}

impl Leaf {
    /// The frame of `e` in `store` (whose entries lie inside its content).
    pub fn new(store: Arc<Container>, e: &Entry, path: PathBuf) -> Leaf {
        Leaf {
            store,
            start: e.offset,
            len: e.length,
            path,
        }
    }
}

impl Source for Leaf {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.len) {
            return Err(Error::truncated(format!(
                "needs {} bytes at {offset} of a {}-byte leaf",
                buf.len(),
                self.len
            )));
        }
        let mut done = 0;
        while done < buf.len() {
            let at = self.start + offset + done as u64;
            let n = self
                .store
                .read_raw_at(at, &mut buf[done..], &mut Deferred::none())?;
            if n == 0 {
                return Err(Error::truncated(format!(
                    "the store ends at {at}, inside a leaf"
                )));
            }
            done += n;
        }
        Ok(())
    }

    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn gone(&self) -> bool {
        self.store.source_gone()
    }
}
