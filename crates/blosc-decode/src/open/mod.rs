//! Openers: read a container's headers and index through a `Source` and
//! produce the format-neutral `Index` (one module per kind), and open a
//! file, a sparse frame or any `Source` as a `Container` with the view it
//! is presented through (`.npy` for arrays).

pub mod bloscpack;
pub mod ctable;
pub mod embed;
pub mod frame;
pub mod packed;
pub mod sframe_dir;
pub mod store;

use crate::container::{Container, Env, View};
use crate::detect::{carrier, head_of, sniff, Kind};
use crate::dtype::Dtype;
use crate::error::{Context, Result};
use crate::format::chunk::{ChunkHeader, EXTENDED_HEADER_LEN};
use crate::format::tensor;
use crate::index::{ChunkEntry, ChunkLoc, Index, Info};
use crate::io::{FileSource, Source};
use crate::npy::{npy_header, NdLayout};
pub use frame::FrameFiles;
pub use sframe_dir::LocalFrame;
use std::path::Path;
use std::sync::Arc;

/// Open `path` as a container if its content is one (`Ok(None)` if not).
pub fn open_path(path: &Path) -> Result<Option<Container>> {
    open_path_with(path, &Env::default())
}

/// Open `path` as a container sharing `env`'s cache and counters with
/// others (`Ok(None)` if it is not one).
pub fn open_path_with(path: &Path, env: &Env) -> Result<Option<Container>> {
    if path.is_dir() {
        if !crate::open::frame::is_sframe_dir(path) {
            return Ok(None);
        }
        return open_sframe(&LocalFrame::new(path), env);
    }
    let src: Arc<dyn Source> = Arc::new(FileSource::open(path)?);
    open_source(src, path, env)
}

/// Open the sparse frame whose files `files` gives (a local directory or a
/// prefix of an object store); `Ok(None)` for a frame that holds no data
/// of its own ([`carrier`]).
pub fn open_sframe(files: &dyn FrameFiles, env: &Env) -> Result<Option<Container>> {
    let path = files.path().to_path_buf();
    let index = crate::open::frame::open_sframe_files(files).in_file(&path)?;
    if crate::detect::carrier_kind(&index.info.metalayers).is_some() {
        return Ok(None);
    }
    finish(&path, index, env).map(Some)
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
    // Without its vlmetalayers a cache cannot tell fetched chunks from the
    // zeros kept in place of the rest.
    if info.vlmetalayers_unreadable {
        return Err(crate::Error::corrupt(format!(
            "{kind}: variable-length metalayers unreadable, fetched chunks unknown"
        )));
    }
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
        header: npy_header(&descr, m.fortran_order, &m.shape, info.nbytes),
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
            header: npy_header(descr, false, &m.shape, nd.data_len()),
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
