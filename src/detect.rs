//! Content detection: which container format a file (or directory) holds,
//! and opening it as a `Container`. Names never matter.

use crate::container::{Container, Env};
use crate::error::Result;
use crate::format::chunk::{ChunkHeader, EXTENDED_HEADER_LEN};
use crate::index::{ChunkEntry, ChunkLoc, Index, Info};
use crate::io::{FileSource, Source};
use std::path::Path;
use std::sync::Arc;

/// Bytes of a file's start that `sniff` looks at.
pub const SNIFF_LEN: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Chunk,
}

/// Guess the format from a file's first bytes and its length.
pub fn sniff(head: &[u8], file_len: u64) -> Option<Kind> {
    if is_chunk(head, file_len) {
        return Some(Kind::Chunk);
    }
    None
}

/// A standalone chunk file: a valid header whose cbytes is the file length.
fn is_chunk(head: &[u8], file_len: u64) -> bool {
    match ChunkHeader::parse(head) {
        Ok(h) => {
            h.cbytes as u64 == file_len
                && h.versionlz <= 9
                && match h.special() {
                    Ok(Some(_)) => true,
                    Ok(None) => h.nbytes == 0 || (h.blocksize > 0 && h.blocksize <= h.nbytes),
                    Err(_) => false,
                }
        }
        Err(_) => false,
    }
}

/// What a cheap look at a file's first bytes tells: its format and, when the
/// header says it, the uncompressed size (without building any index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub kind: Kind,
    /// Uncompressed size if known from the header alone.
    pub nbytes: Option<u64>,
}

/// Look at the start of `path` (a file, or a sparse-frame directory) and say
/// whether it is a container. Reads at most `SNIFF_LEN` bytes.
pub fn probe_path(path: &Path) -> Result<Option<Probe>> {
    let src = FileSource::open(path)?;
    let mut head = vec![0u8; (SNIFF_LEN as u64).min(src.len()) as usize];
    src.read_exact_at(0, &mut head)
        .map_err(|e| e.in_file(path))?;
    Ok(sniff(&head, src.len()).map(|kind| Probe {
        kind,
        nbytes: match kind {
            Kind::Chunk => ChunkHeader::parse(&head).ok().map(|h| h.nbytes as u64),
        },
    }))
}

/// Open `path` as a container if its content is one (`Ok(None)` if not).
pub fn open_path(path: &Path) -> Result<Option<Container>> {
    open_path_with(path, &Env::default())
}

pub fn open_path_with(path: &Path, env: &Env) -> Result<Option<Container>> {
    let src: Arc<dyn Source> = Arc::new(FileSource::open(path)?);
    open_source(src, path, env)
}

/// Open the bytes of `src` as a container (`path` names it in messages).
pub fn open_source(src: Arc<dyn Source>, path: &Path, env: &Env) -> Result<Option<Container>> {
    let mut head = vec![0u8; (SNIFF_LEN as u64).min(src.len()) as usize];
    src.read_exact_at(0, &mut head)
        .map_err(|e| e.in_file(path))?;
    let Some(kind) = sniff(&head, src.len()) else {
        return Ok(None);
    };
    let index = match kind {
        Kind::Chunk => open_chunk(src),
    }
    .map_err(|e| e.in_file(path))?;
    Container::new(path, index, env.clone()).map(Some)
}

/// The index of a file holding exactly one chunk.
pub fn open_chunk(src: Arc<dyn Source>) -> Result<Index> {
    let mut head = vec![0u8; (EXTENDED_HEADER_LEN as u64).min(src.len()) as usize];
    src.read_exact_at(0, &mut head)?;
    let h = ChunkHeader::parse(&head)?;
    let info = Info {
        format: if h.is_extended() {
            "blosc2-chunk"
        } else {
            "blosc1-chunk"
        }
        .into(),
        version: h.version as u32,
        typesize: h.typesize as u32,
        chunksize: h.nbytes as u64,
        nchunks: 1,
        nbytes: h.nbytes as u64,
        cbytes: src.len(),
        codec: h
            .codec()
            .map(|c| c.name().to_string())
            .unwrap_or_else(|e| e.reason),
        filters: crate::describe::filter_names(&h),
        ..Default::default()
    };
    Ok(Index {
        chunks: vec![ChunkEntry {
            uoff: 0,
            ulen: h.nbytes as u64,
            loc: ChunkLoc::Stored {
                src: 0,
                offset: 0,
                cbytes: src.len(),
            },
            checksum: None,
        }],
        sources: vec![src],
        info,
    })
}
