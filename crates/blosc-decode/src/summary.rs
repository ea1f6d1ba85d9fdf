//! What a container is, as data for a description of it: the facts beyond
//! [`Info`] ([`Container::summary`]), one row per chunk
//! ([`Container::chunk_rows`]), and what a frame holding no values of its
//! own stands for ([`carrier_summary`]). Turning them into text is the
//! caller's.

use crate::container::{Container, View};
use crate::error::Error;
use crate::format::msgpack::{Reader, Val};
use crate::index::{ChunkLoc, Info};
use std::path::Path;

/// Facts about an opened container beyond its [`Info`].
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The block size of the first chunk: `Some(Some(n))` fixed,
    /// `Some(None)` varying from block to block, `None` when no chunk is
    /// readable.
    pub blocksize: Option<Option<u64>>,
    /// How an array is presented, if the container is one.
    pub array: Option<ArrayView>,
    /// What python-blosc2's `save_tensor` recorded (`Err`: why that record
    /// is unreadable), if the frame has one.
    pub saved_tensor: Option<Result<SavedTensor, String>>,
    /// What a python-blosc2 cache holds of its source, if the container is
    /// such a cache.
    pub python_cache: Option<PythonCache>,
}

/// How an array is presented.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayView {
    /// Presented as a `.npy` file (`false`: its dtype has no `.npy` form,
    /// so the raw C-order values are presented).
    pub npy: bool,
    /// The dtype as `numpy.save` writes it.
    pub dtype: String,
    /// The b2nd shapes, for arrays stored in chunks and blocks.
    pub shapes: Option<Shapes>,
    /// The presented length in bytes.
    pub len: u64,
}

/// A b2nd array's shape, chunk shape and block shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shapes {
    /// Items along each dimension.
    pub shape: Vec<u64>,
    /// A chunk's items along each dimension.
    pub chunkshape: Vec<u64>,
    /// A block's items along each dimension.
    pub blockshape: Vec<u64>,
}

/// What `save_tensor` recorded: the library and the shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedTensor {
    /// `numpy`, `torch` or `tensorflow`.
    pub kind: String,
    /// The tensor's shape.
    pub shape: Vec<u64>,
}

/// What a python-blosc2 cache (a `Proxy` or a `RemoteArray` cache) holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonCache {
    /// `"proxy cache"` or `"RemoteArray cache"`.
    pub kind: &'static str,
    /// Chunks fetched whole.
    pub whole: u64,
    /// Chunks of which some blocks are fetched, not all.
    pub partly: u64,
    /// Chunks in all.
    pub nchunks: u64,
    /// The source it caches (its kind and path or URL), as far as the
    /// cache says.
    pub source: Option<String>,
}

/// One row of a container's chunk table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRow {
    /// The first chunk the row stands for.
    pub chunk: u64,
    /// Where its content starts in the raw content.
    pub uoff: u64,
    /// Its uncompressed length.
    pub ulen: u64,
    /// Stored, or special.
    pub kind: RowKind,
}

/// What a [`ChunkRow`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowKind {
    /// A run of `run` chunks of one special value, stored nowhere.
    Special {
        /// The value's name (`zeros`, `nan`, `repeated value`, `uninitialized`).
        name: &'static str,
        /// How many chunks in a row.
        run: u64,
    },
    /// A chunk stored in a source.
    Stored {
        /// Its offset in the source.
        offset: u64,
        /// Its stored length, as its header says when readable.
        cbytes: u64,
        /// Which source holds it, when the container has several.
        source: Option<u32>,
        /// What its header says it holds.
        content: Result<Stored, String>,
    },
}

/// What a stored chunk's header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// The whole chunk is one special value.
    Special(&'static str),
    /// Blocks compressed with a codec.
    Blocks {
        /// The codec's name (`None`: an id this library does not know).
        codec: Option<&'static str>,
        /// How many blocks.
        nblocks: u32,
        /// Their size (`None`: varying).
        blocksize: Option<u32>,
        /// Stored as is, not compressed.
        memcpyed: bool,
    },
}

impl Container {
    /// Facts about the container beyond [`Container::info`].
    pub fn summary(&self) -> Summary {
        let blocksize = self
            .first_layout()
            .map(|l| l.header.fixed_blocksize().map(u64::from));
        Summary {
            blocksize,
            array: self.array_view(),
            saved_tensor: saved_tensor(self.info()),
            python_cache: self.python_cache(),
        }
    }

    fn array_view(&self) -> Option<ArrayView> {
        let v @ View::Npy { nd, descr, .. } = self.view() else {
            return None;
        };
        Some(ArrayView {
            npy: v.is_npy(),
            dtype: descr.clone(),
            shapes: nd.as_ref().map(|nd| Shapes {
                shape: nd.shape.clone(),
                chunkshape: nd.chunkshape.clone(),
                blockshape: nd.blockshape.clone(),
            }),
            len: self.len(),
        })
    }

    fn python_cache(&self) -> Option<PythonCache> {
        let (cache, n) = (self.cache()?, self.fetched_count()?);
        Some(PythonCache {
            kind: cache.kind,
            whole: n.whole,
            partly: n.partly,
            nchunks: n.nchunks,
            source: cache_source(self.info()),
        })
    }

    /// The chunk table: one row a stored chunk, one a run of special ones,
    /// placed where the chunks' own sizes put them; failing that, as the
    /// index assumes, with the error that stopped the check.
    pub fn chunk_rows(&self) -> (Vec<ChunkRow>, Option<Error>) {
        let (all, err) = match self.checked_chunks() {
            Ok(all) => (all, None),
            Err(e) => (self.chunks(), Some(e)),
        };
        let nchunks = self.info().nchunks;
        let several = self.chunks().len() > 1;
        let rows = all.iter().enumerate().map(|(n, e)| {
            let kind = match &e.loc {
                ChunkLoc::Special { kind, .. } => {
                    let next = all.get(n + 1).map_or(nchunks, |x| x.chunk);
                    RowKind::Special {
                        name: kind.name(),
                        run: next.saturating_sub(e.chunk),
                    }
                }
                ChunkLoc::Stored {
                    src,
                    offset,
                    cbytes,
                } => RowKind::Stored {
                    offset: *offset,
                    // The index may only bound a chunk's size (frames know
                    // where it starts, not where it ends): its header says.
                    cbytes: self.layout(n).map_or(*cbytes, |l| l.header.cbytes as u64),
                    source: (several && *src > 0).then_some(*src),
                    content: self.stored(n),
                },
            };
            ChunkRow {
                chunk: e.chunk,
                uoff: e.uoff,
                ulen: e.ulen,
                kind,
            }
        });
        (rows.collect(), err)
    }

    /// What stored chunk `n` holds, as its header says.
    fn stored(&self, n: usize) -> Result<Stored, String> {
        let l = self.layout(n).map_err(|e| e.reason)?;
        Ok(match l.special {
            Some(k) => Stored::Special(k.name()),
            None => Stored::Blocks {
                codec: l.header.codec().ok().map(|c| c.name()),
                nblocks: l.header.nblocks(),
                blocksize: l.header.fixed_blocksize(),
                memcpyed: l.header.memcpyed(),
            },
        })
    }
}

/// The `__pack_tensor__` record of a frame saved by `save_tensor`.
fn saved_tensor(i: &Info) -> Option<Result<SavedTensor, String>> {
    use crate::format::tensor;
    let (_, v) = i.vlmetalayers.iter().find(|(n, _)| n == tensor::VLMETA)?;
    Some(tensor::parse(v).map(|t| SavedTensor {
        kind: t.kind,
        shape: t.numpy.shape,
    }))
}

/// Where a cache's source is: the `proxy-source` metalayer's kind and
/// path or URL, or a RemoteArray's `source` (its `b2o` vlmetalayer).
fn cache_source(i: &Info) -> Option<String> {
    let find = |v: &[(String, Vec<u8>)], name: &str| {
        v.iter().find(|(n, _)| n == name).map(|(_, b)| b.clone())
    };
    let (bytes, inner) = match find(&i.metalayers, crate::format::proxy::SOURCE_META) {
        Some(b) => (b, None),
        None => (find(&i.vlmetalayers, "b2o")?, Some("source")),
    };
    let v = Reader::new(&bytes).read().ok()?;
    let m = match inner {
        Some(key) => field(&v, key)?,
        None => v,
    };
    let text = |v: Option<Val>| match v {
        Some(Val::Array(items)) => {
            let t: Vec<&str> = items.iter().filter_map(|x| x.as_str()).collect();
            (!t.is_empty()).then(|| t.join(" "))
        }
        Some(v) => v.as_str().map(str::to_string),
        None => None,
    };
    let kind = text(field(&m, "source_kind").or_else(|| field(&m, "kind")));
    let remote = match (text(field(&m, "urlbase")), text(field(&m, "path"))) {
        (Some(base), Some(p)) => Some(format!("{base} {p}")),
        _ => None,
    };
    let place = text(field(&m, "urlpath"))
        .or_else(|| text(field(&m, "local_abspath")))
        .or(remote);
    match (kind, place) {
        (Some(k), Some(p)) => Some(format!("{k} {p}")),
        (None, Some(p)) => Some(p),
        (Some(k), None) => Some(k),
        (None, None) => None,
    }
}

/// The value of `key` in a msgpack map.
fn field<'a>(m: &Val<'a>, key: &str) -> Option<Val<'a>> {
    match m {
        Val::Map(m) => m
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v.clone()),
        _ => None,
    }
}

/// A frame that holds no values of its own (a saved lazy expression or
/// UDF, a remote reference: see [`crate::detect::carrier`]), described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carrier {
    /// What it is, and which metalayer says so.
    pub kind: String,
    /// What its `b2o` and `_LazyArray` variable-length metalayers hold, in
    /// their order.
    pub items: Vec<CarrierItem>,
}

/// One thing a [`Carrier`]'s metalayers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CarrierItem {
    /// A text by its key (expression or UDF source, URL, path...).
    Text(String, String),
    /// An operand it computes from: its name, and its path or URL.
    Operand(String, String),
}

/// [`Carrier`] of the local file at `path`; `None` for any file that is not
/// such a frame, or cannot be read.
pub fn carrier_summary(path: &Path) -> Option<Carrier> {
    let kind = crate::detect::carrier_path(path)?;
    let src = crate::io::FileSource::open(&crate::detect::frame_file(path)).ok()?;
    let h = crate::open::frame::read_header(&src).ok()?;
    let mut c = Carrier {
        kind,
        items: Vec::new(),
    };
    for (name, bytes) in crate::open::frame::vlmetalayers_or_none(&src, &h) {
        if name != "b2o" && name != "_LazyArray" {
            continue;
        }
        let Ok(Val::Map(m)) = Reader::new(&bytes).read() else {
            continue;
        };
        for (k, v) in &m {
            match (k.as_str(), v) {
                (Some("kind" | "version"), _) | (None, _) => {}
                (Some("operands"), Val::Map(ops)) => {
                    for (o, v) in ops {
                        let o = o.as_str().unwrap_or("?").to_string();
                        c.items.push(CarrierItem::Operand(o, operand(v)));
                    }
                }
                (Some(k), v) => {
                    if let Some(text) = v.as_str() {
                        c.items
                            .push(CarrierItem::Text(k.to_string(), text.to_string()));
                    }
                }
            }
        }
    }
    Some(c)
}

/// An operand of a saved expression as a path or URL: a text, or a map
/// holding `urlpath`, or `urlbase` and `path`.
fn operand(v: &Val) -> String {
    if let Some(t) = v.as_str() {
        return t.to_string();
    }
    let Val::Map(m) = v else {
        return "?".into();
    };
    let get = |key: &str| {
        m.iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .and_then(|(_, v)| v.as_str())
    };
    match (get("urlpath"), get("urlbase"), get("path")) {
        (Some(p), _, _) => p.to_string(),
        (None, Some(base), Some(p)) => format!("{base} {p}"),
        (None, None, Some(p)) => p.to_string(),
        _ => "?".into(),
    }
}
