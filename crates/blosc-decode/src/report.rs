//! The text `bloscfs info` prints.

use crate::container::Container;
use crate::index::ChunkLoc;
use std::fmt::Write;

pub fn render_info(c: &Container, chunks: bool) -> String {
    let i = c.info();
    let mut s = String::new();
    let _ = writeln!(s, "file:          {}", c.path().display());
    let _ = writeln!(s, "format:        {} (version {})", i.format, i.version);
    let _ = writeln!(s, "codec:         {}", i.codec);
    let _ = writeln!(
        s,
        "filters:       {}",
        if i.filters.is_empty() {
            "none".to_string()
        } else {
            i.filters.join(", ")
        }
    );
    let _ = writeln!(s, "typesize:      {}", i.typesize);
    if i.chunksize == 0 {
        let _ = writeln!(s, "chunksize:     variable");
    } else {
        let _ = writeln!(s, "chunksize:     {}", i.chunksize);
    }
    if let Some(l) = c.first_layout() {
        match l.header.fixed_blocksize() {
            Some(bs) => _ = writeln!(s, "blocksize:     {bs}"),
            None => _ = writeln!(s, "blocksize:     variable"),
        }
    }
    let _ = writeln!(s, "nchunks:       {}", i.nchunks);
    let _ = writeln!(s, "nbytes:        {}", i.nbytes);
    let _ = writeln!(s, "cbytes:        {}", i.cbytes);
    let _ = writeln!(s, "ratio:         {:.2}x", i.ratio());
    if let v @ crate::container::View::Npy { nd, descr, .. } = c.view() {
        if v.is_npy() {
            let _ = writeln!(s, "presented as:  .npy, dtype {descr}");
        } else {
            let _ = writeln!(
                s,
                "presented as:  raw C-order array bytes (dtype {descr} has no .npy form)"
            );
        }
        if let Some(nd) = nd {
            let _ = writeln!(s, "shape:         {:?}", nd.shape);
            let _ = writeln!(s, "chunk shape:   {:?}", nd.chunkshape);
            let _ = writeln!(s, "block shape:   {:?}", nd.blockshape);
        }
        let _ = writeln!(s, "npy size:      {}", c.len());
    }
    tensor_line(i, &mut s);
    cache_line(c, &mut s);
    for (k, v) in &i.extra {
        let _ = writeln!(s, "{:<15}{}", format!("{k}:"), v);
    }
    let names = |v: &[(String, Vec<u8>)]| {
        v.iter()
            .map(|(n, _)| n.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !i.metalayers.is_empty() {
        let _ = writeln!(s, "metalayers:    {}", names(&i.metalayers));
    }
    if !i.vlmetalayers.is_empty() {
        let _ = writeln!(s, "vlmetalayers:  {}", names(&i.vlmetalayers));
    }
    if chunks {
        chunk_table(c, &mut s);
    }
    s
}

/// Where a frame saved by python-blosc2's `save_tensor` came from.
fn tensor_line(i: &crate::index::Info, s: &mut String) {
    use crate::format::tensor;
    if let Some((_, v)) = i.vlmetalayers.iter().find(|(n, _)| n == tensor::VLMETA) {
        match tensor::parse(v) {
            Ok(t) => _ = writeln!(s, "saved tensor:  {} (shape {:?})", t.kind, t.numpy.shape),
            Err(e) => _ = writeln!(s, "saved tensor:  unreadable ({e})"),
        }
    }
}

/// What a python-blosc2 cache holds of its source, and where that is.
fn cache_line(c: &Container, s: &mut String) {
    let (Some(cache), Some(n)) = (c.cache(), c.fetched_count()) else {
        return;
    };
    let part = if n.partly > 0 {
        format!(" ({} more in part)", n.partly)
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "cache:         {}, {} of {} chunks fetched{part}; reads of the rest fail",
        cache.kind, n.whole, n.nchunks
    );
    if let Some(src) = cache_source(c.info()) {
        let _ = writeln!(s, "cache of:      {src}");
    }
}

/// Where a cache's source is: the `proxy-source` metalayer's kind and
/// path or URL, or a RemoteArray's `source` (its `b2o` vlmetalayer).
fn cache_source(i: &crate::index::Info) -> Option<String> {
    use crate::format::msgpack::{Reader, Val};
    let find = |v: &[(String, Vec<u8>)], name: &str| {
        v.iter().find(|(n, _)| n == name).map(|(_, b)| b.clone())
    };
    let (bytes, inner) = match find(&i.metalayers, crate::format::proxy::SOURCE_META) {
        Some(b) => (b, None),
        None => (find(&i.vlmetalayers, "b2o")?, Some("source")),
    };
    let v = Reader::new(&bytes).read().ok()?;
    fn field<'a>(m: &Val<'a>, key: &str) -> Option<Val<'a>> {
        match m {
            Val::Map(m) => m
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v.clone()),
            _ => None,
        }
    }
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

/// The `--chunks` table: one line a stored chunk, one a run of special ones.
fn chunk_table(c: &Container, s: &mut String) {
    let _ = writeln!(
        s,
        "\n{:>8} {:>14} {:>12} {:>14} {:>10}  kind",
        "chunk", "uoffset", "nbytes", "offset", "cbytes"
    );
    // Where the chunks' own sizes put them; failing that, as assumed.
    let all = c.checked_chunks().unwrap_or_else(|e| {
        let _ = writeln!(s, "(chunk sizes: {e})");
        c.chunks()
    });
    let nchunks = c.info().nchunks;
    for (n, e) in all.iter().enumerate() {
        match &e.loc {
            ChunkLoc::Special { kind, .. } => {
                // A run of special chunks is one entry.
                let next = all.get(n + 1).map_or(nchunks, |x| x.chunk);
                let run = next.saturating_sub(e.chunk);
                let _ = writeln!(
                    s,
                    "{:>8} {:>14} {:>12} {:>14} {:>10}  special: {}{}",
                    e.chunk,
                    e.uoff,
                    e.ulen,
                    "-",
                    0,
                    kind.name(),
                    if run > 1 {
                        format!(" ({run} chunks, {} to {})", e.chunk, next - 1)
                    } else {
                        String::new()
                    }
                );
            }
            ChunkLoc::Stored {
                src,
                offset,
                cbytes,
            } => {
                // The index may only bound a chunk's size (frames know
                // where it starts, not where it ends): the chunk's own
                // header says.
                let cbytes = c.layout(n).map_or(*cbytes, |l| l.header.cbytes as u64);
                let src = if c.chunks().len() > 1 && *src > 0 {
                    format!(" (source {src})")
                } else {
                    String::new()
                };
                let _ = writeln!(
                    s,
                    "{:>8} {:>14} {:>12} {:>14} {:>10}  {}{src}",
                    e.chunk,
                    e.uoff,
                    e.ulen,
                    offset,
                    cbytes,
                    stored_kind(c, n)
                );
            }
        }
    }
}

/// What stored chunk `n` holds, as its header says.
fn stored_kind(c: &Container, n: usize) -> String {
    match c.layout(n) {
        Ok(l) => match l.special {
            Some(k) => format!("special: {}", k.name()),
            None => format!(
                "{} {} blocks of {}{}",
                l.header.codec().map(|c| c.name()).unwrap_or("?"),
                l.header.nblocks(),
                l.header
                    .fixed_blocksize()
                    .map_or("variable size".to_string(), |b| b.to_string()),
                if l.header.memcpyed() {
                    " (memcpyed)"
                } else {
                    ""
                }
            ),
        },
        Err(e) => format!("error: {}", e.reason),
    }
}

/// The text `bloscfs info` prints for a frame at `path` that holds no
/// values of its own (a saved lazy expression or UDF, a remote reference:
/// [`crate::detect::carrier`]): what it is, and what its
/// variable-length metalayers say it computes from (expression or UDF,
/// operands, URL and path). `None` for any other file.
pub fn render_carrier(path: &std::path::Path) -> Option<String> {
    use crate::format::msgpack::{Reader, Val};
    let kind = crate::detect::carrier_path(path)?;
    let src = crate::io::FileSource::open(&crate::detect::frame_file(path)).ok()?;
    let h = crate::open::frame::read_header(&src).ok()?;
    let mut s = String::new();
    let _ = writeln!(s, "file:          {}", path.display());
    let _ = writeln!(s, "python-blosc2: {kind}");
    let _ = writeln!(s, "data:          none of its own: passed through raw");
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
                        let o = o.as_str().unwrap_or("?");
                        let _ = writeln!(
                            s,
                            "operand {o}:{:w$}{}",
                            "",
                            operand(v),
                            w = 6usize.saturating_sub(o.len())
                        );
                    }
                }
                (Some(k), v) => {
                    if let Some(text) = v.as_str() {
                        let text = text.trim_end().replace('\n', "\n               ");
                        let w = 14usize.saturating_sub(k.len());
                        let _ = writeln!(s, "{k}:{:w$}{text}", "");
                    }
                }
            }
        }
    }
    Some(s)
}

/// An operand of a saved expression as a path or URL: a text, or a map
/// holding `urlpath`, or `urlbase` and `path`.
fn operand(v: &crate::format::msgpack::Val) -> String {
    use crate::format::msgpack::Val;
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
