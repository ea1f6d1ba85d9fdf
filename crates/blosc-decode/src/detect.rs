//! Content detection: which container format a file (or directory) holds,
//! and opening it as a `Container`. Names never matter.

use crate::container::{Container, Env, View};
use crate::dtype::Dtype;
use crate::error::{Context, Result};
use crate::format::chunk::{ChunkHeader, EXTENDED_HEADER_LEN};
use crate::format::{frame, tensor};
use crate::index::{ChunkEntry, ChunkLoc, Index, Info};
use crate::io::{FileSource, Source};
use crate::npy::{npy_header, NdLayout};
pub use crate::open::frame::FrameFiles;
use crate::srcdir::SourceDir;
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
}

fn head_of(src: &dyn Source, path: &Path) -> Result<Vec<u8>> {
    let mut head = vec![0u8; (SNIFF_LEN as u64).min(src.len()) as usize];
    src.read_exact_at(0, &mut head).in_file(path)?;
    Ok(head)
}

/// Is `path` a container, and what does it present? Reads the first bytes
/// and, for frames, the header (metalayers); Bloscpack and packed files are
/// opened (their sizes are not in the first bytes). `Ok(None)`: not a container.
pub fn probe_path(path: &Path) -> Result<Option<Probe>> {
    if crate::longpath::is_dir(path) {
        if !crate::open::frame::is_sframe_dir(path) {
            return Ok(None);
        }
        let dir = SourceDir::open(path, true).in_file(path)?;
        let index = Arc::new(FileSource::open_in(&dir, "chunks.b2frame")?);
        return probe_kind(index, Kind::SFrame, path).map(Some);
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

/// [`carrier`] of a local file, if it is a frame (`None` on any error).
pub fn carrier_path(path: &Path) -> Option<String> {
    let src = FileSource::open(path).ok()?;
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
pub fn probe_sframe_index(index: Arc<dyn Source>, path: &Path) -> Result<Probe> {
    probe_kind(index, Kind::SFrame, path)
}

/// What a container of a known kind presents.
fn probe_kind(src: Arc<dyn Source>, kind: Kind, path: &Path) -> Result<Probe> {
    let probe = |len, npy| Probe {
        kind,
        len,
        npy,
        cbytes: src.len(),
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
            match npy_view(&info, path) {
                Some(Ok(v)) => Ok(probe(v.len(h.nbytes), v.is_npy())),
                _ => Ok(probe(h.nbytes, false)),
            }
        }
        Kind::Bloscpack | Kind::Packed => {
            let env = Env::new(1 << 20);
            let c = open_source(src.clone(), path, &env)?.ok_or_else(|| {
                crate::Error::corrupt("container vanished while probing").in_file(path)
            })?;
            Ok(probe(c.len(), c.view().is_npy()))
        }
    }
}

/// Open `path` as a container if its content is one (`Ok(None)` if not).
pub fn open_path(path: &Path) -> Result<Option<Container>> {
    open_path_with(path, &Env::default())
}

/// Open `path` as a container sharing `env`'s cache and counters with
/// others (`Ok(None)` if it is not one).
pub fn open_path_with(path: &Path, env: &Env) -> Result<Option<Container>> {
    if crate::longpath::is_dir(path) {
        if !crate::open::frame::is_sframe_dir(path) {
            return Ok(None);
        }
        let dir = SourceDir::open(path, true).in_file(path)?;
        return open_sframe_dir(Arc::new(dir), env).map(Some);
    }
    let src: Arc<dyn Source> = Arc::new(FileSource::open(path)?);
    open_source(src, path, env)
}

/// Open the sparse frame in the directory `dir` (already opened).
pub fn open_sframe_dir(dir: Arc<SourceDir>, env: &Env) -> Result<Container> {
    open_sframe(&dir, env)
}

/// Open the sparse frame whose files `files` gives (a local directory or a
/// prefix of an object store).
pub fn open_sframe(files: &dyn FrameFiles, env: &Env) -> Result<Container> {
    let path = files.path().to_path_buf();
    let index = crate::open::frame::open_sframe_files(files).in_file(&path)?;
    finish(&path, index, env)
}

/// Open the bytes of `src` as a container (`path` names it in messages).
pub fn open_source(src: Arc<dyn Source>, path: &Path, env: &Env) -> Result<Option<Container>> {
    let head = head_of(src.as_ref(), path)?;
    let Some(kind) = sniff(&head, src.len()) else {
        return Ok(None);
    };
    if kind == Kind::Frame && carrier(src.as_ref(), path)?.is_some() {
        return Ok(None);
    }
    let index = match kind {
        Kind::Chunk => open_chunk(src),
        Kind::Frame => crate::open::frame::open(src),
        Kind::Bloscpack => crate::open::bloscpack::open(src),
        Kind::Packed => crate::open::packed::open(src),
        Kind::SFrame => unreachable!("sniff never says SFrame"),
    }
    .in_file(path)?;
    finish(path, index, env).map(Some)
}

/// Wrap an index in a container with the right view (`.npy` for arrays).
fn finish(path: &Path, index: Index, env: &Env) -> Result<Container> {
    let view = npy_view(&index.info, path);
    let cache = cache_of(&index.info).map_err(|e| e.in_file(path))?;
    let mut c = Container::new(path, index, env.clone())?;
    if let Some(cache) = cache {
        c.set_cache(cache);
    }
    c.refine_info();
    match view {
        Some(Ok(v)) => c.with_view(v).in_file(path),
        Some(Err(e)) => {
            log::warn!("{}: array presented as raw bytes: {e}", path.display());
            Ok(c)
        }
        None => Ok(c),
    }
}

/// What a cache of another array (python-blosc2's `Proxy` and
/// `RemoteArray` caches) holds, by its metalayers; `None` for any other
/// container. A bitmap that does not fit the chunk count is an error.
fn cache_of(info: &Info) -> Result<Option<crate::container::Cache>> {
    use crate::format::proxy;
    let Some(kind) = proxy::cache_kind(&info.metalayers) else {
        return Ok(None);
    };
    let fetched = proxy::fetched(&info.vlmetalayers, info.nchunks)
        .map_err(|e| crate::Error::corrupt(format!("{kind}: {e}")))?;
    Ok(Some(crate::container::Cache { kind, fetched }))
}

/// The view of an N-dimensional array, if the container is one: `.npy`
/// when its dtype can be written in a `.npy` header exactly, else its
/// C-order bytes under the source name (`View::is_npy` false), logged
/// (`path` names the file in the log).
pub fn npy_view(info: &Info, path: &Path) -> Option<Result<View>> {
    if let Some((_, json)) = info
        .metalayers
        .iter()
        .find(|(n, _)| n == "bloscpack-metadata")
    {
        let m = crate::format::bloscpack::numpy_meta(json)?;
        return Some(flat_view(&m, info));
    }
    if let Some((_, meta)) = info
        .metalayers
        .iter()
        .find(|(n, _)| n == "b2nd" || n == "caterva")
    {
        return Some(b2nd_view(meta, info, path));
    }
    let (_, value) = info
        .vlmetalayers
        .iter()
        .find(|(n, _)| n == tensor::VLMETA)?;
    Some(
        tensor::parse(value)
            .map_err(crate::Error::corrupt)
            .and_then(|t| flat_view(&t.numpy, info)),
    )
}

/// The dtype text's item size and `.npy` descr, or why there is none.
fn npy_dtype(text: &str) -> std::result::Result<(u64, String), String> {
    let d = Dtype::parse(text)?;
    let descr = d.descr().map_err(|e| format!("dtype {text:?}: {e}"))?;
    match d.itemsize() {
        0 => Err(format!("dtype {text:?} has empty items")),
        n => Ok((n, descr)),
    }
}

/// A NumPy array stored as it is (packed by Bloscpack, or saved by
/// python-blosc2's `save_tensor`): `.npy` of the stored bytes.
fn flat_view(m: &crate::format::bloscpack::NumpyMeta, info: &Info) -> Result<View> {
    let (itemsize, descr) = npy_dtype(&m.descr).map_err(crate::Error::unsupported)?;
    let n = m.shape.iter().try_fold(itemsize, |a, &d| a.checked_mul(d));
    crate::ensure!(
        n == Some(info.nbytes),
        corrupt,
        "array metadata (shape {:?}, dtype {}) does not match the {} bytes stored",
        m.shape,
        m.descr,
        info.nbytes
    );
    Ok(View::Npy {
        header: npy_header(&descr, m.fortran_order, &m.shape),
        nd: None,
        descr: m.descr.clone(),
    })
}

/// A b2nd array. C-Blosc2 lays it out in items of the frame's typesize
/// whatever the dtype text says; when the two disagree, the items are
/// presented as opaque `|V<typesize>` ones so that no byte is lost.
fn b2nd_view(meta: &[u8], info: &Info, path: &Path) -> Result<View> {
    let m = crate::format::b2nd::parse(meta)?;
    let typesize = info.typesize as u64;
    let dtype = if m.dtype_format == 0 {
        npy_dtype(&m.dtype)
    } else {
        Err(format!("dtype format {} is not NumPy's", m.dtype_format))
    };
    let npy = |itemsize: u64, descr: &str, shown: String| -> Result<View> {
        let nd = NdLayout::new(&m.shape, &m.chunkshape, &m.blockshape, itemsize)?;
        Ok(View::Npy {
            header: npy_header(descr, false, &m.shape),
            nd: Some(Box::new(nd)),
            descr: shown,
        })
    };
    match dtype {
        Ok((itemsize, descr)) if typesize == 0 || itemsize == typesize => {
            npy(itemsize, &descr, m.dtype.clone())
        }
        Ok((itemsize, _)) => {
            log::warn!(
                "{}: array dtype {:?} has {itemsize}-byte items but the frame's typesize is {typesize}; presenting every stored byte as '|V{typesize}' items (laid out by typesize, as C-Blosc2 reads it)",
                path.display(),
                m.dtype
            );
            npy(
                typesize,
                &format!("'|V{typesize}'"),
                format!("|V{typesize}"),
            )
        }
        Err(why) => {
            log::warn!(
                "{}: array cannot be presented as .npy ({why}); presenting its raw C-order bytes ({typesize}-byte items) under the source name",
                path.display()
            );
            let nd = NdLayout::new(&m.shape, &m.chunkshape, &m.blockshape, typesize)?;
            Ok(View::Npy {
                header: Vec::new(),
                nd: Some(Box::new(nd)),
                descr: m.dtype.clone(),
            })
        }
    }
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
            chunk: 0,
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
        sizes_assumed: false,
    })
}
