//! Content detection: which container format a file (or directory) holds,
//! and what it presents (`Probe`), from its content alone: names never
//! matter. Opening one as a `Container` is `crate::open`'s.

use crate::container::Env;
use crate::error::{Context, Result};
use crate::format::chunk::ChunkHeader;
use crate::format::frame;
use crate::index::Info;
use crate::io::{FileSource, Source};
use crate::open::FrameFiles;
use std::path::Path;
use std::sync::Arc;

/// Bytes of a file's start that `sniff` looks at.
pub const SNIFF_LEN: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// The kinds of container.
pub enum Kind {
    /// A single Blosc1/Blosc2 chunk.
    Chunk,
    /// A contiguous Blosc2 frame.
    Frame,
    /// A sparse frame (a directory).
    SFrame,
    /// A Bloscpack file.
    Bloscpack,
    /// The early Blosc2 packed super-chunk.
    Packed,
}

/// No container is shorter (a Blosc chunk's header alone is 16 bytes): a
/// shorter file is plain, known without opening it.
pub const MIN_LEN: u64 = 16;

/// Guess the format from a file's first bytes and its length.
pub fn sniff(head: &[u8], file_len: u64) -> Option<Kind> {
    if frame::is_frame(head) {
        return Some(Kind::Frame);
    }
    if crate::format::bloscpack::is_bloscpack(head) {
        return Some(Kind::Bloscpack);
    }
    if is_chunk(head, file_len) {
        return Some(Kind::Chunk);
    }
    if crate::format::packed::looks_packed(head, file_len) {
        return Some(Kind::Packed);
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

/// What a cheap look at a container tells, without building its index: its
/// format, the size it is presented with, and whether it is shown as `.npy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Which kind of container.
    pub kind: Kind,
    /// Presented length (the `.npy` file for arrays).
    pub len: u64,
    /// Presented as a `.npy` file.
    pub npy: bool,
    /// Bytes the container occupies on disk.
    pub cbytes: u64,
    /// Where a frame's offsets index starts in the source probed (after
    /// the chunks of a frame file, after the header of a sparse frame's
    /// `chunks.b2frame`): what the open that usually follows reads
    /// ([`hint_offsets`]).
    pub offsets_at: Option<u64>,
}

pub(crate) fn head_of(src: &dyn Source, path: &Path) -> Result<Vec<u8>> {
    let mut head = vec![0u8; (SNIFF_LEN as u64).min(src.len()) as usize];
    src.read_exact_at(0, &mut head).in_file(path)?;
    Ok(head)
}

/// Is `path` a container, and what does it present? Reads the first bytes
/// and, for frames, the header (metalayers); Bloscpack and packed files are
/// opened (their sizes are not in the first bytes). `Ok(None)`: not a container.
pub fn probe_path(path: &Path) -> Result<Option<Probe>> {
    if path.is_dir() {
        if !crate::open::frame::is_sframe_dir(path) {
            return Ok(None);
        }
        let index = crate::open::LocalFrame::new(path).index()?;
        return probe_sframe_index(index, path);
    }
    probe_source(Arc::new(FileSource::open(path)?), path)
}

/// Is the byte source `src` a container, and what does it present
/// ([`probe_path`] for any [`Source`]; `path` names it in messages)?
pub fn probe_source(src: Arc<dyn Source>, path: &Path) -> Result<Option<Probe>> {
    let head = head_of(src.as_ref(), path)?;
    match sniff(&head, src.len()) {
        Some(Kind::Frame) if carrier(src.as_ref(), path)?.is_some() => Ok(None),
        Some(kind) => probe_kind(src, kind, path).map(Some),
        None => Ok(None),
    }
}

/// What a frame that holds no data of its own stands for, by its
/// metalayers: python-blosc2 saves a lazy expression or UDF, and a
/// reference to a remote array, as an empty b2nd array (its chunks never
/// written, read as zeros) whose `b2o` metalayer names the kind (4.x), or
/// whose `LazyArray` metalayer marks it (UDFs, and expressions before 4.0).
/// Such a file passes through raw under its own name.
pub fn carrier(src: &dyn Source, path: &Path) -> Result<Option<String>> {
    let h = crate::open::frame::read_header(src).in_file(path)?;
    Ok(carrier_kind(&h.metalayers))
}

/// The file holding the frame header at `path`: the file itself, or a
/// sparse frame directory's `chunks.b2frame`.
pub fn frame_file(path: &Path) -> std::borrow::Cow<'_, Path> {
    if path.is_dir() {
        path.join("chunks.b2frame").into()
    } else {
        path.into()
    }
}

/// [`carrier`] of a local file or sparse-frame directory, if it is a
/// frame (`None` on any error).
pub fn carrier_path(path: &Path) -> Option<String> {
    let src = FileSource::open(&frame_file(path)).ok()?;
    let head = head_of(&src, path).ok()?;
    match sniff(&head, src.len()) {
        Some(Kind::Frame) => carrier(&src, path).ok().flatten(),
        _ => None,
    }
}

/// [`carrier`] from a frame's metalayers.
pub fn carrier_kind(metalayers: &[(String, Vec<u8>)]) -> Option<String> {
    use crate::format::msgpack::{Reader, Val};
    for (name, value) in metalayers {
        if name == "LazyArray" {
            return Some("lazy array (LazyArray metalayer)".into());
        }
        if name != "b2o" {
            continue;
        }
        let kind = match Reader::new(value).read() {
            Ok(Val::Map(m)) => m
                .iter()
                .find(|(k, _)| k.as_str() == Some("kind"))
                .and_then(|(_, v)| v.as_str().map(str::to_string)),
            _ => None,
        };
        if let Some(k @ ("lazyexpr" | "lazyudf" | "c2array")) = kind.as_deref() {
            return Some(format!("{k} (b2o metalayer)"));
        }
    }
    None
}

/// What the sparse frame whose index is `index` presents.
pub fn probe_sframe_index(index: Arc<dyn Source>, path: &Path) -> Result<Option<Probe>> {
    if carrier(index.as_ref(), path)?.is_some() {
        return Ok(None);
    }
    probe_kind(index, Kind::SFrame, path).map(Some)
}

/// A frame just probed from `src` is usually opened next (a lookup, then
/// an open): have `src` start reading the frame's offsets index
/// ([`Probe::offsets_at`]) while the caller goes on, so that the open need
/// not wait for the disk again. At most 1 MiB. For local files: a remote
/// source fetches what it is hinted, a request its open makes anyway (with
/// the object's tail).
pub fn hint_offsets(src: &dyn Source, probe: &Probe) {
    let Some(at) = probe.offsets_at else {
        return;
    };
    if at < src.len() {
        src.will_need(at, (src.len() - at).min(1 << 20));
    }
}

/// What a container of a known kind presents.
fn probe_kind(src: Arc<dyn Source>, kind: Kind, path: &Path) -> Result<Probe> {
    let probe = |len, npy| Probe {
        kind,
        len,
        npy,
        cbytes: src.len(),
        offsets_at: None,
    };
    match kind {
        Kind::Chunk => {
            let head = head_of(src.as_ref(), path)?;
            let h = ChunkHeader::parse(&head).in_file(path)?;
            Ok(probe(h.nbytes as u64, false))
        }
        Kind::Frame | Kind::SFrame => {
            let h = crate::open::frame::read_header(src.as_ref()).in_file(path)?;
            let info = Info {
                metalayers: h.metalayers.clone(),
                vlmetalayers: crate::open::frame::vlmetalayers_or_none(src.as_ref(), &h),
                nbytes: h.nbytes,
                typesize: h.typesize,
                ..Default::default()
            };
            let offsets_at = Some(match kind {
                Kind::SFrame => h.header_len,
                _ => h.header_len.saturating_add(h.cbytes),
            });
            let p = match crate::open::npy_view(&info, path) {
                Some(Ok(v)) => probe(v.len(h.nbytes), v.is_npy()),
                _ => probe(h.nbytes, false),
            };
            Ok(Probe { offsets_at, ..p })
        }
        Kind::Bloscpack | Kind::Packed => {
            let env = Env::new(1 << 20);
            let c = crate::open::open_source(src.clone(), path, &env)?.ok_or_else(|| {
                crate::Error::corrupt("container vanished while probing").in_file(path)
            })?;
            Ok(probe(c.len(), c.view().is_npy()))
        }
    }
}
