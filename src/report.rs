//! The text `bloscfs info` prints, from what the decoder says of a
//! container (`Container::info`, `Container::summary`,
//! `Container::chunk_rows`, `carrier_summary`).

use blosc_decode::summary::{Carrier, CarrierItem, ChunkRow, RowKind, Stored, Summary};
use blosc_decode::Container;
use std::fmt::Write;

/// The report of an opened container; `chunks` adds its chunk table.
pub fn render_info(c: &Container, chunks: bool) -> String {
    let i = c.info();
    let sum = c.summary();
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
    match sum.blocksize {
        Some(Some(bs)) => _ = writeln!(s, "blocksize:     {bs}"),
        Some(None) => _ = writeln!(s, "blocksize:     variable"),
        None => {}
    }
    let _ = writeln!(s, "nchunks:       {}", i.nchunks);
    let _ = writeln!(s, "nbytes:        {}", i.nbytes);
    let _ = writeln!(s, "cbytes:        {}", i.cbytes);
    let _ = writeln!(s, "ratio:         {:.2}x", i.ratio());
    array_lines(&sum, &mut s);
    tensor_line(&sum, &mut s);
    cache_line(&sum, &mut s);
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

/// How an array is presented: `.npy` or raw values, its shapes.
fn array_lines(sum: &Summary, s: &mut String) {
    let Some(a) = &sum.array else {
        return;
    };
    if a.npy {
        let _ = writeln!(s, "presented as:  .npy, dtype {}", a.dtype);
    } else {
        let _ = writeln!(
            s,
            "presented as:  raw C-order array bytes (dtype {} has no .npy form)",
            a.dtype
        );
    }
    if let Some(nd) = &a.shapes {
        let _ = writeln!(s, "shape:         {:?}", nd.shape);
        let _ = writeln!(s, "chunk shape:   {:?}", nd.chunkshape);
        let _ = writeln!(s, "block shape:   {:?}", nd.blockshape);
    }
    let _ = writeln!(s, "npy size:      {}", a.len);
}

/// Where a frame saved by python-blosc2's `save_tensor` came from.
fn tensor_line(sum: &Summary, s: &mut String) {
    match &sum.saved_tensor {
        Some(Ok(t)) => _ = writeln!(s, "saved tensor:  {} (shape {:?})", t.kind, t.shape),
        Some(Err(e)) => _ = writeln!(s, "saved tensor:  unreadable ({e})"),
        None => {}
    }
}

/// What a python-blosc2 cache holds of its source, and where that is.
fn cache_line(sum: &Summary, s: &mut String) {
    let Some(cache) = &sum.python_cache else {
        return;
    };
    let part = if cache.partly > 0 {
        format!(" ({} more in part)", cache.partly)
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "cache:         {}, {} of {} chunks fetched{part}; reads of the rest fail",
        cache.kind, cache.whole, cache.nchunks
    );
    if let Some(src) = &cache.source {
        let _ = writeln!(s, "cache of:      {src}");
    }
}

/// The `--chunks` table: one line a stored chunk, one a run of special ones.
fn chunk_table(c: &Container, s: &mut String) {
    let _ = writeln!(
        s,
        "\n{:>8} {:>14} {:>12} {:>14} {:>10}  kind",
        "chunk", "uoffset", "nbytes", "offset", "cbytes"
    );
    let (rows, err) = c.chunk_rows();
    if let Some(e) = err {
        let _ = writeln!(s, "(chunk sizes: {e})");
    }
    for r in &rows {
        chunk_line(r, s);
    }
}

/// One line of the `--chunks` table.
fn chunk_line(r: &ChunkRow, s: &mut String) {
    let (offset, cbytes, kind) = match &r.kind {
        RowKind::Special { name, run } => {
            let runs = if *run > 1 {
                format!(" ({run} chunks, {} to {})", r.chunk, r.chunk + run - 1)
            } else {
                String::new()
            };
            ("-".to_string(), 0, format!("special: {name}{runs}"))
        }
        RowKind::Stored {
            offset,
            cbytes,
            source,
            content,
        } => {
            let src = source.map_or(String::new(), |n| format!(" (source {n})"));
            (
                offset.to_string(),
                *cbytes,
                format!("{}{src}", stored_kind(content)),
            )
        }
    };
    let _ = writeln!(
        s,
        "{:>8} {:>14} {:>12} {:>14} {:>10}  {kind}",
        r.chunk, r.uoff, r.ulen, offset, cbytes
    );
}

/// What a stored chunk holds, as its header says.
fn stored_kind(content: &Result<Stored, String>) -> String {
    match content {
        Ok(Stored::Special(name)) => format!("special: {name}"),
        Ok(Stored::Blocks {
            codec,
            nblocks,
            blocksize,
            memcpyed,
        }) => format!(
            "{} {nblocks} blocks of {}{}",
            codec.unwrap_or("?"),
            blocksize.map_or("variable size".to_string(), |b| b.to_string()),
            if *memcpyed { " (memcpyed)" } else { "" }
        ),
        Err(e) => format!("error: {e}"),
    }
}

/// The text `bloscfs info` prints for a frame at `path` that holds no
/// values of its own (a saved lazy expression or UDF, a remote reference):
/// what it is, and what its variable-length metalayers say it computes
/// from (expression or UDF, operands, URL and path). `None` for any other
/// file.
pub fn render_carrier(path: &std::path::Path) -> Option<String> {
    let c: Carrier = blosc_decode::summary::carrier_summary(path)?;
    let mut s = String::new();
    let _ = writeln!(s, "file:          {}", path.display());
    let _ = writeln!(s, "python-blosc2: {}", c.kind);
    let _ = writeln!(s, "data:          none of its own: passed through raw");
    for item in &c.items {
        match item {
            CarrierItem::Operand(o, place) => {
                let w = 6usize.saturating_sub(o.len());
                let _ = writeln!(s, "operand {o}:{:w$}{place}", "");
            }
            CarrierItem::Text(k, text) => {
                let text = text.trim_end().replace('\n', "\n               ");
                let w = 14usize.saturating_sub(k.len());
                let _ = writeln!(s, "{k}:{:w$}{text}", "");
            }
        }
    }
    Some(s)
}
