//! Contiguous and sparse Blosc2 frames.

use crate::decode::{decompress_chunk, fill_special, nan_pattern};
use crate::describe;
use crate::ensure;
use crate::error::{Context, Error, Result};
use crate::format::chunk::{
    ChunkHeader, ChunkLayout, Special, EXTENDED_HEADER_LEN, MIN_HEADER_LEN,
};
use crate::format::frame::{self, FrameHeader, Offset};
use crate::index::{ChunkEntry, ChunkLoc, Index, Info};
use crate::io::{read_vec, Source};
use std::path::Path;
use std::sync::Arc;

/// More chunks than this in one frame is refused: the chunk table costs
/// about 64 bytes a chunk in memory (a 1 TiB frame of 64 KiB chunks fits).
pub const MAX_CHUNKS: u64 = 1 << 24;
/// Metalayer values larger than this are not decoded.
const MAX_VLMETA: u64 = 64 << 20;
/// Most special-chunk entries that may follow another special entry (a
/// change of special kind with no stored chunk between): each is a table
/// entry that takes no room in the file, so their number is capped.
/// Writers change kind only where the data does (a few times); a run of one
/// kind is one entry however long.
pub const MAX_SPECIAL_CHANGES: u64 = 1 << 16;

/// Is `head` (a file's first bytes, 38 or more) a Blosc2 frame? Its
/// declared uncompressed size if so. Only fixed-position fields are read,
/// so a header longer than `head` (big metalayers) still probes.
pub fn probe(head: &[u8]) -> Option<u64> {
    frame::declared_nbytes(head)
}

/// Read and parse the header of the frame in `src`.
pub fn read_header(src: &dyn Source) -> Result<FrameHeader> {
    let n = (frame::PREFIX_LEN as u64).min(src.len());
    let head = read_vec(src, 0, n)?;
    let (hl, _) = frame::prefix(&head)?;
    let buf = read_vec(src, 0, hl)?;
    frame::parse_header(&buf)
}

/// Read and decode the offsets chunk at `at` (its raw int64 entries). With
/// `expect` (fixed chunk size), the chunk must hold exactly that many
/// entries; without (variable sizes: each chunk but one special stored in
/// the file), at most `max_stored + 1`. Both checked on its header, before
/// anything is decoded.
fn read_offsets(
    src: &dyn Source,
    at: u64,
    expect: Option<u64>,
    max_stored: u64,
) -> Result<Offsets> {
    let head = read_vec(
        src,
        at,
        (EXTENDED_HEADER_LEN as u64).min(src.len().saturating_sub(at)),
    )
    .context("offsets index")?;
    let h = ChunkHeader::parse(&head).context("offsets index")?;
    let n = h.nbytes as u64 / 8;
    ensure!(
        h.nbytes % 8 == 0,
        corrupt,
        "offsets index of {} bytes is not whole int64s",
        h.nbytes
    );
    ensure!(
        n <= MAX_CHUNKS,
        corrupt,
        "offsets index declares {n} chunks, more than {MAX_CHUNKS}"
    );
    match expect {
        Some(e) => ensure!(
            n == e,
            corrupt,
            "offsets index holds {n} entries but the frame's size needs {e} chunks"
        ),
        None => ensure!(
            n <= max_stored.saturating_add(1),
            corrupt,
            "offsets index declares {n} chunks of variable size, but there is room for {max_stored} stored chunks and one special"
        ),
    }
    let chunk = read_vec(src, at, h.cbytes as u64).context("offsets index")?;
    // A special chunk (a frame of special chunks only, as C-Blosc2 writes
    // one filled with a special value) repeats one int64: not expanded.
    let layout = ChunkLayout::parse(&chunk).context("offsets index")?;
    if let Some(kind) = layout.special {
        let p = layout.value.len();
        if kind != Special::Value || p == 0 || 8 % p == 0 {
            let mut v = [0u8; 8];
            fill_special(kind, h.typesize as usize, &layout.value, 0, &mut v);
            return Ok(Offsets::Repeated(i64::from_le_bytes(v), n));
        }
    }
    let decoded = decompress_chunk(&chunk).context("offsets index")?;
    ensure!(
        decoded.len() as u64 == n * 8,
        corrupt,
        "offsets index decoded to {} bytes, its header says {}",
        decoded.len(),
        h.nbytes
    );
    Ok(Offsets::Decoded(decoded))
}

/// A frame's offsets index: its int64 entries, decoded, or one value
/// repeated.
enum Offsets {
    Decoded(Vec<u8>),
    Repeated(i64, u64),
}

impl Offsets {
    fn len(&self) -> u64 {
        match self {
            Offsets::Decoded(d) => d.len() as u64 / 8,
            Offsets::Repeated(_, n) => *n,
        }
    }

    fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        let (decoded, value, repeats): (&[u8], _, _) = match self {
            Offsets::Decoded(d) => (d, 0, 0),
            Offsets::Repeated(v, n) => (&[], *v, *n as usize),
        };
        // `decoded` is whole int64s (checked against the index's header).
        let decoded = frame::offset_values(decoded).into_iter().flatten();
        decoded.chain(std::iter::repeat_n(value, repeats))
    }
}

/// The frame's offsets (raw int64 entries), or none for an empty frame
/// (C-Blosc2 writes no offsets chunk while nbytes is 0).
fn frame_offsets(src: &dyn Source, h: &FrameHeader, at: u64, max_stored: u64) -> Result<Offsets> {
    if h.nbytes == 0 {
        return Ok(Offsets::Decoded(Vec::new()));
    }
    read_offsets(src, at, h.fixed_nchunks(), max_stored)
}

fn info_from(h: &FrameHeader, format: &str, nchunks: u64, cbytes: u64) -> Info {
    let mut filters: Vec<String> = h
        .filters
        .iter()
        .filter(|&&f| f != 0)
        .map(|&f| describe::filter_name(f))
        .collect();
    filters.dedup();
    let extra = vec![("clevel".to_string(), h.clevel.to_string())];
    Info {
        format: format.into(),
        version: h.version as u32,
        typesize: h.typesize,
        chunksize: if h.variable_chunks {
            0
        } else {
            h.chunksize as u64
        },
        nchunks,
        nbytes: h.nbytes,
        cbytes,
        codec: frame::codec_name(h.codec),
        filters,
        metalayers: h.metalayers.clone(),
        vlmetalayers: Vec::new(),
        vlmetalayers_unreadable: false,
        extra,
    }
}

/// The chunk table from the offsets index, built in one pass; consecutive
/// special chunks of one kind become one entry (a frame of fixed chunk size
/// may declare 2^24 of them in a few bytes), and the kind may change at most
/// [`MAX_SPECIAL_CHANGES`] times between stored chunks, so the table is
/// bounded by what the file holds plus that cap. `stored(i, n)` gives the location of the stored chunk with
/// index entry `n` and, in a frame of variable chunk sizes, its uncompressed
/// size (from its header). At most `max_stored` entries may name stored
/// chunks (what the file or directory has room for), checked as they come,
/// so a lying index is refused before its table is built.
///
/// A special offset carries no size. With a fixed chunk size that is the
/// chunk size (the last chunk short); with variable sizes C-Blosc2 cannot
/// reopen such a frame at all (it divides by the chunk size 0), so we take
/// what the frame's nbytes leaves for it when it is the only special chunk,
/// and give a clear error otherwise. (A parser of the offsets index, each
/// entry checked as it comes: one loop, kept whole.)
fn build_chunks(
    h: &FrameHeader,
    offs: &Offsets,
    max_stored: u64,
    mut stored: impl FnMut(usize, u64) -> Result<(ChunkLoc, Option<u64>)>,
) -> Result<Vec<ChunkEntry>> {
    let fixed = h.fixed_chunksize();
    // Entries: stored chunks and the runs of special ones between them.
    let most = offs
        .len()
        .min(max_stored.saturating_mul(2).saturating_add(1));
    let mut entries = Entries {
        chunks: Vec::with_capacity(most as usize),
        merge: fixed.is_some(),
        nan_period: nan_pattern(h.typesize as usize).len() as u64,
        changes: 0,
    };
    let (mut nstored, mut special) = (0u64, None);
    let mut uoff = 0u64;
    for (i, v) in offs.iter().enumerate() {
        let (loc, size) = match frame::decode_offset(v).in_chunk(i as u64)? {
            Offset::At(n) => {
                nstored += 1;
                ensure!(
                    nstored <= max_stored,
                    corrupt,
                    "offsets index names more than {max_stored} stored chunks, more than the frame has room for"
                );
                stored(i, n).in_chunk(i as u64)?
            }
            Offset::Special(kind) => {
                if fixed.is_none() {
                    ensure!(
                        special.is_none(),
                        unsupported,
                        "two or more special chunks in a frame of variable chunk sizes: their sizes are not recorded"
                    );
                    special = Some(i);
                }
                let typesize = h.typesize.min(255) as u8;
                let value = Box::new([]);
                (
                    ChunkLoc::Special {
                        kind,
                        typesize,
                        value,
                    },
                    None,
                )
            }
        };
        let ulen = match fixed {
            Some(cs) => cs.min(h.nbytes.saturating_sub(uoff)),
            None => size.unwrap_or(0),
        };
        entries.push(i, uoff, ulen, loc)?;
        uoff = uoff
            .checked_add(ulen)
            .ok_or_else(|| Error::corrupt("chunk sizes overflow"))?;
    }
    let mut chunks = entries.chunks;
    if let Some(s) = special {
        // The one special chunk of a variable-size frame: what is left.
        let rest = h.nbytes.checked_sub(uoff).ok_or_else(|| {
            Error::corrupt(format!(
                "chunks hold {uoff} bytes but the frame declares {}",
                h.nbytes
            ))
        })?;
        chunks[s].ulen = rest;
        for c in &mut chunks[s + 1..] {
            c.uoff += rest;
        }
    }
    Ok(chunks)
}

/// A frame's index entries as they are built: stored chunks, and runs of
/// special chunks of one kind.
struct Entries {
    chunks: Vec<ChunkEntry>,
    /// Whether special chunks merge into runs (chunks of a fixed size).
    merge: bool,
    /// A NaN run merges while it stays in phase with its pattern.
    nan_period: u64,
    /// Changes of special kind with no stored chunk between.
    changes: u64,
}

impl Entries {
    /// Enter chunk `i`, `ulen` bytes at `uoff`.
    fn push(&mut self, i: usize, uoff: u64, ulen: u64, loc: ChunkLoc) -> Result<()> {
        let ChunkLoc::Special { kind, .. } = &loc else {
            return self.start(i, uoff, ulen, loc);
        };
        match self.chunks.last_mut() {
            // The run's content is the same as the chunks' one after the
            // other: zeros, or NaNs (4 or 8 bytes) in whole chunks of a
            // multiple of 8 bytes.
            Some(ChunkEntry {
                ulen: run,
                loc: ChunkLoc::Special { kind: k, .. },
                ..
            }) => {
                if self.merge && kind == k && (*k != Special::Nan || *run % self.nan_period == 0) {
                    *run += ulen;
                    return Ok(());
                }
                self.changes += 1;
                ensure!(
                    self.changes <= MAX_SPECIAL_CHANGES,
                    unsupported,
                    "special chunks change kind more than {MAX_SPECIAL_CHANGES} times with no stored chunk between (each change is an index entry that takes no room in the file)"
                );
                self.start(i, uoff, ulen, loc)
            }
            _ => self.start(i, uoff, ulen, loc),
        }
    }

    /// Enter chunk `i` as an entry of its own.
    fn start(&mut self, i: usize, uoff: u64, ulen: u64, loc: ChunkLoc) -> Result<()> {
        self.chunks.push(ChunkEntry {
            chunk: i as u64,
            uoff,
            ulen,
            loc,
            checksum: None,
        });
        Ok(())
    }
}

/// Does the chunk table of the frame with header `h` give its chunks a size
/// they may not have (see [`crate::sizes`])?
fn sizes_assumed(h: &FrameHeader) -> bool {
    h.fixed_chunksize()
        .is_some_and(|cs| crate::sizes::need_check(cs, h.nbytes))
}

/// The uncompressed size of the chunk at `at`, from its header.
pub(crate) fn chunk_nbytes(src: &dyn Source, at: u64) -> Result<u64> {
    let head = read_vec(src, at, MIN_HEADER_LEN as u64)?;
    let h = ChunkHeader::parse(&[&head[..], &[0u8; 16]].concat())?;
    Ok(h.nbytes as u64)
}

fn vlmetalayers(src: &dyn Source, h: &FrameHeader) -> Result<Vec<(String, Vec<u8>)>> {
    if !h.has_vlmetalayers {
        return Ok(Vec::new());
    }
    let len = src.len().min(h.frame_len);
    ensure!(
        len >= frame::TAIL_LEN as u64,
        truncated,
        "frame too short for a trailer"
    );
    let tail = read_vec(src, len - frame::TAIL_LEN as u64, frame::TAIL_LEN as u64)?;
    let tl = frame::trailer_len(&tail)?;
    ensure!(
        tl <= len && tl <= MAX_VLMETA,
        corrupt,
        "frame trailer of {tl} bytes does not fit"
    );
    let tr = read_vec(src, len - tl, tl)?;
    let mut out = Vec::new();
    for (name, raw) in frame::parse_trailer(&tr)? {
        // Values are Blosc2 chunks; show their decoded content.
        let value = match ChunkHeader::parse(&raw) {
            Ok(ch) if (ch.nbytes as u64) <= MAX_VLMETA => decompress_chunk(&raw).unwrap_or(raw),
            _ => raw,
        };
        out.push((name, value));
    }
    Ok(out)
}

/// The frame's variable-length metalayers, or none when its trailer cannot
/// be read (logged).
pub(crate) fn vlmetalayers_or_none(src: &dyn Source, h: &FrameHeader) -> Vec<(String, Vec<u8>)> {
    vlmetalayers(src, h).unwrap_or_else(|e| {
        log::warn!("frame trailer unreadable ({e}); variable-length metalayers skipped");
        Vec::new()
    })
}

/// Fill `info`'s variable-length metalayers, or mark them unreadable.
pub(crate) fn read_vlmetalayers(info: &mut Info, src: &dyn Source, h: &FrameHeader) {
    match vlmetalayers(src, h) {
        Ok(v) => info.vlmetalayers = v,
        Err(e) => {
            log::warn!("frame trailer unreadable ({e}); variable-length metalayers skipped");
            info.vlmetalayers_unreadable = true;
        }
    }
}

/// Open a contiguous frame.
pub fn open(src: Arc<dyn Source>) -> Result<Index> {
    let h = read_header(src.as_ref())?;
    ensure!(
        h.frame_type == 0,
        corrupt,
        "a sparse frame header in a file (its chunks live in a directory)"
    );
    let data_end = h
        .header_len
        .checked_add(h.cbytes)
        .filter(|&e| e <= src.len())
        .ok_or_else(|| {
            Error::truncated(format!(
                "frame declares {} bytes of chunks after its {}-byte header but the file has {}",
                h.cbytes,
                h.header_len,
                src.len()
            ))
        })?;
    // Every stored chunk takes at least a chunk header of the data.
    let max_stored = h.cbytes / MIN_HEADER_LEN as u64;
    let offs = frame_offsets(src.as_ref(), &h, data_end, max_stored)?;
    let fixed = h.fixed_chunksize().is_some();
    let srcr = src.as_ref();
    let chunks = build_chunks(&h, &offs, max_stored, |_, o| {
        let at = h
            .header_len
            .checked_add(o)
            .filter(|&a| a < data_end)
            .ok_or_else(|| {
                Error::corrupt(format!(
                    "chunk offset {o} points outside the frame's data ({} bytes)",
                    h.cbytes
                ))
            })?;
        let nbytes = if fixed {
            None
        } else {
            Some(chunk_nbytes(srcr, at)?)
        };
        Ok((
            ChunkLoc::Stored {
                src: 0,
                offset: at,
                cbytes: data_end - at,
            },
            nbytes,
        ))
    })?;
    let mut info = info_from(&h, "blosc2-frame", offs.len(), src.len());
    read_vlmetalayers(&mut info, src.as_ref(), &h);
    let index = Index {
        sources: vec![src],
        chunks,
        info,
        sizes_assumed: sizes_assumed(&h),
    };
    index.validate()?;
    Ok(index)
}

/// Is `dir` a sparse frame (a directory holding `chunks.b2frame`)?
pub fn is_sframe_dir(dir: &Path) -> bool {
    dir.join("chunks.b2frame").is_file()
}

/// How many stored chunks a sparse frame whose directory holds `entries`
/// entries may name: each has a file of its own there, so twice the entries
/// (and 64 more) leaves room for chunk files gone missing (their ranges read
/// as errors) while a lying index cannot make the chunk table (and one
/// source per chunk) any larger than the directory warrants.
fn sframe_room(entries: u64) -> u64 {
    entries.min(MAX_CHUNKS).saturating_mul(2).saturating_add(64)
}

/// The file name of stored chunk number `n` of a sparse frame: eight hex
/// digits and `.chunk`, directly in the frame's directory, whatever the
/// index says.
fn chunk_file(n: u64) -> Result<String> {
    ensure!(
        n <= u32::MAX as u64,
        corrupt,
        "chunk number {n} is out of range"
    );
    Ok(format!("{n:08X}.chunk"))
}

/// The files of a sparse frame, wherever they are kept: a local directory
/// ([`super::sframe_dir::LocalFrame`]), a prefix of an object store, or a
/// directory opened by rules of the caller's own.
pub trait FrameFiles: Send + Sync {
    /// The frame's name, for messages.
    fn path(&self) -> &Path;
    /// How many entries the frame's directory has (bounds the chunk table).
    fn entries(&self) -> u64;
    /// The index, `chunks.b2frame`.
    fn index(&self) -> Result<Arc<dyn Source>>;
    /// The chunk file `name` (`XXXXXXXX.chunk`), opened on first read: a
    /// missing one fails the reads of its chunk only.
    fn chunk(&self, name: &str) -> Arc<dyn Source>;
}

/// Open the sparse frame directory `dir` (a link to one is followed), its
/// files by their paths ([`super::sframe_dir::LocalFrame`]).
pub fn open_sframe(dir: &Path) -> Result<Index> {
    open_sframe_files(&super::sframe_dir::LocalFrame::new(dir))
}

/// Open the sparse frame whose files `files` gives. Chunk files are named
/// from the index numbers (`%08X.chunk`) and opened on first read.
pub fn open_sframe_files(files: &dyn FrameFiles) -> Result<Index> {
    let index_path = files.path().join("chunks.b2frame");
    let src = files.index()?;
    let h = read_header(src.as_ref()).in_file(&index_path)?;
    ensure!(
        h.frame_type == 1,
        corrupt,
        "chunks.b2frame is not a sparse-frame index (frame type {})",
        h.frame_type
    );
    let max_stored = sframe_room(files.entries());
    let offs = frame_offsets(src.as_ref(), &h, h.header_len, max_stored).in_file(&index_path)?;
    let fixed = h.fixed_chunksize().is_some();
    let mut sources: Vec<Arc<dyn Source>> = vec![src.clone()];
    let chunks = build_chunks(&h, &offs, max_stored, |_, n| {
        let s = files.chunk(&chunk_file(n)?);
        let nbytes = if fixed {
            None
        } else {
            Some(chunk_nbytes(s.as_ref(), 0)?)
        };
        sources.push(s);
        Ok((
            ChunkLoc::Stored {
                src: (sources.len() - 1) as u32,
                offset: 0,
                cbytes: u32::MAX as u64,
            },
            nbytes,
        ))
    })?;
    // On disk: the index file plus the chunk files, whose sizes the header's
    // cbytes sums (no need to stat thousands of files).
    let total_c = src.len().saturating_add(h.cbytes);
    let mut info = info_from(&h, "blosc2-sframe", offs.len(), total_c);
    read_vlmetalayers(&mut info, src.as_ref(), &h);
    let index = Index {
        sources,
        chunks,
        info,
        sizes_assumed: sizes_assumed(&h),
    };
    index.validate()?;
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::chunk_file;

    /// Whatever number a sparse frame's index gives, the chunk file it
    /// names is `XXXXXXXX.chunk` directly inside the frame's directory;
    /// numbers past eight hex digits are refused.
    #[test]
    fn chunk_files_are_named_inside_the_frame_directory() {
        let mut ns: Vec<u64> = (0..64).map(|b| 1u64 << b).collect();
        ns.extend([0, 1, 9, 10, 0xdead_beef, u32::MAX as u64]);
        ns.extend([u32::MAX as u64 + 1, u64::MAX, i64::MAX as u64]);
        for n in ns {
            match chunk_file(n) {
                Ok(name) => {
                    assert!(n <= u32::MAX as u64, "{n} accepted");
                    assert!(!name.contains('/'), "{n}: {name}");
                    let (hex, ext) = name.split_at(8);
                    assert_eq!(ext, ".chunk", "{n}: {name}");
                    assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{n}: {name}");
                    assert_eq!(u64::from_str_radix(hex, 16).unwrap(), n);
                }
                Err(e) => {
                    assert!(n > u32::MAX as u64, "{n} refused: {e}");
                    assert!(e.to_string().contains("out of range"), "{e}");
                }
            }
        }
    }
}
