//! Regression tests for the bugs fuzzing found (listed in fuzz/README.md).
//! Each input under tests/fixtures/regress/ is the minimized
//! fuzzer input; each test replays it through what its fuzz target does and
//! checks the specific fix: an error, never a panic, abort, hang or an
//! allocation sized by an unchecked field.

#[path = "../../../tests/common/fixtures.rs"]
mod common;
use blosc_decode::format::chunk::{ChunkLayout, MAX_MEMCPYED_BLOCKS};
use blosc_decode::io::MemSource;
use common::per_cpu;
use std::path::Path;
use std::sync::Arc;

fn input(name: &str) -> Vec<u8> {
    std::fs::read(common::fixture(&format!("regress/{name}"))).unwrap()
}

/// What the `chunk` fuzz target does.
fn fuzz_chunk(data: &[u8]) {
    if let Ok(layout) = ChunkLayout::parse(data) {
        if layout.header.nbytes <= 1 << 24 {
            let _ = blosc_decode::decode::decompress_chunk(data);
        }
    }
}

/// What the `read_at` fuzz target does: the input is the file; the window
/// (offset u64, length u16) comes from its last 10 bytes.
fn fuzz_read_at(data: &[u8]) {
    let (off, len) = match data.len().checked_sub(10) {
        Some(k) => (
            u64::from_le_bytes(data[k..k + 8].try_into().unwrap()),
            u16::from_le_bytes([data[k + 8], data[k + 9]]),
        ),
        None => (0, 4096),
    };
    let src = Arc::new(MemSource::new(data.to_vec()));
    let env = per_cpu(1 << 20);
    if let Ok(Some(c)) = blosc_decode::open_source(src, Path::new("regress"), &env) {
        let total = c.len();
        let mut whole = vec![0u8; total.min(1 << 20) as usize];
        let _ = c.read_at(0, &mut whole);
        let mut window = vec![0u8; len as usize];
        let _ = c.read_at(off % total.saturating_add(1), &mut window);
    }
}

/// Found by `chunk` (OOM, malloc of 2 GiB): a 17-byte memcpyed chunk
/// declaring ~800 MB of 3-byte blocks made `ChunkLayout::parse` reserve one
/// extent per block (8 bytes each) before anything was read. Memcpyed chunks
/// have no block starts to bound the count, so it is capped.
#[test]
fn chunk_memcpyed_many_blocks_oom() {
    let data = input("chunk-memcpyed-many-blocks-oom.bin");
    let e = ChunkLayout::parse(&data).unwrap_err();
    assert!(e.to_string().contains("memcpyed chunk"), "{e}");
    fuzz_chunk(&data);
    fuzz_read_at(&data);
    // The cap leaves ordinary memcpyed chunks alone: 2^20 blocks of 1 byte.
    let mut ok = data.clone();
    ok.truncate(16);
    ok[4..8].copy_from_slice(&(MAX_MEMCPYED_BLOCKS).to_le_bytes());
    ok[8..12].copy_from_slice(&1u32.to_le_bytes());
    ok[12..16].copy_from_slice(&(MAX_MEMCPYED_BLOCKS + 16).to_le_bytes());
    let l = ChunkLayout::parse(&ok).unwrap();
    assert_eq!(l.extents.len(), MAX_MEMCPYED_BLOCKS as usize);
}

/// Split a `sparse_frame` fuzz input into a sparse-frame directory: index,
/// then `00000000.chunk`, ... (the separator of fuzz/fuzz_targets/sparse_frame.rs).
fn sparse_frame_dir(data: &[u8]) -> tempfile::TempDir {
    const SEP: &[u8] = b"\n--chunk--\n";
    let dir = tempfile::tempdir().unwrap();
    let mut parts = Vec::new();
    let mut rest = data;
    while let Some(i) = rest.windows(SEP.len()).position(|w| w == SEP) {
        parts.push(&rest[..i]);
        rest = &rest[i + SEP.len()..];
    }
    parts.push(rest);
    std::fs::write(dir.path().join("chunks.b2frame"), parts[0]).unwrap();
    for (i, c) in parts[1..].iter().enumerate() {
        std::fs::write(dir.path().join(format!("{i:08X}.chunk")), c).unwrap();
    }
    dir
}

/// Peak resident memory of this process so far (VmHWM), in bytes.
/// The message of an open that must fail.
fn refusal<T>(r: blosc_decode::Result<T>) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(_) => panic!("opened"),
    }
}

/// Open a reference-made file of tests/fixtures/regress/ (one container).
fn open_regress(name: &str) -> blosc_decode::Result<blosc_decode::Container> {
    let env = per_cpu(1 << 20);
    blosc_decode::open_path_with(&common::fixture(&format!("regress/{name}")), &env)
        .map(|c| c.expect("a container"))
}

fn status_bytes(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let l = s.lines().find(|l| l.starts_with(field)).unwrap();
    l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Run `f` alone among this file's tests and return what it returned with
/// how far the process's resident memory rose above where it stood before
/// (its peak, reset first: an earlier test's peak must not hide this one's),
/// and how much of that it kept.
fn memory_of<T>(f: impl FnOnce() -> T) -> (T, u64, u64) {
    let _alone = alone();
    std::fs::write("/proc/self/clear_refs", "5").expect("resetting the peak RSS");
    let base = status_bytes("VmRSS:");
    let r = f();
    let peak = status_bytes("VmHWM:").saturating_sub(base);
    let kept = status_bytes("VmRSS:").saturating_sub(base);
    (r, peak, kept)
}

/// Tests that may use much memory take turns, so that none counts another's.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Found by `sparse_frame` (OOM, 2373 MB RSS): the chunk files of a sparse frame are recorded with a
/// placeholder size (`u32::MAX`, so they need not be opened at mount), and
/// `Container::layout` checks a chunk header's cbytes only against that
/// placeholder. A tiny chunk file whose header claims ~2 GiB of cbytes gets
/// a last block running to that claimed end, and the read resizes (and
/// zero-fills) the thread-local read buffer to ~2 GiB before the short read
/// fails; the buffer keeps that size afterwards (so libFuzzer blamed a later,
/// innocent input; this one is hand-made: a real index and a 44-byte chunk
/// file). Fixed in `Container::layout`: the chunk is bounded by
/// `min(cbytes, source.len() - offset)` before its header is trusted.
#[test]
fn sframe_chunk_cbytes_beyond_file_reads_2gib() {
    let dir = sparse_frame_dir(&input("sframe-chunk-cbytes-beyond-file.bin"));
    let env = per_cpu(1 << 20);
    let c = blosc_decode::open_path_with(dir.path(), &env)
        .unwrap()
        .unwrap();
    let (r, grew, _) = memory_of(|| {
        let mut buf = vec![0u8; c.len().min(1 << 20) as usize];
        c.read_at(0, &mut buf)
    });
    assert!(r.is_err());
    assert!(grew < 256 << 20, "one read raised peak RSS by {grew} bytes");
}

/// Found by `read_at` built with overflow checks (`-O -a`): a b2nd frame
/// whose array is small enough but whose padded content (chunks in the grid
/// times the padded chunk size) overflows u64. Without overflow checks the
/// size wrapped to a small number, passed the check against the frame's
/// content, and the array was presented as `.npy` over a bogus layout. Now
/// the layout is refused and the frame is presented as raw bytes.
#[test]
fn b2nd_padded_size_overflow_is_refused() {
    use blosc_decode::container::View;
    use blosc_decode::npy::NdLayout;
    let data = input("b2nd-padded-size-overflow.bin");
    let src = Arc::new(MemSource::new(data.clone()));
    let env = per_cpu(1 << 20);
    let c = blosc_decode::open_source(src, Path::new("regress"), &env)
        .unwrap()
        .unwrap();
    assert!(matches!(c.view(), View::Raw), "presented as an array");
    assert_eq!(c.len(), c.raw_len());
    fuzz_read_at(&data);
    // 2^50 chunks of 2^30 padded bytes (u64 overflow), and 2^40 chunks of
    // 2^20 bytes (2^60: beyond the array size bound): both refused.
    for (shape, chunk) in [
        ([1u64 << 50, 1], [1u64, 1 << 30]),
        ([1 << 40, 1], [1, 1 << 20]),
    ] {
        let e = NdLayout::new(&shape, &chunk, &chunk, 1).unwrap_err();
        assert!(e.to_string().contains("padded array size"), "{e}");
    }
    // A padded layout that fits is fine: 3 chunks of 4 elements for 10.
    let l = NdLayout::new(&[10], &[4], &[2], 8).unwrap();
    assert_eq!(l.raw_len(), 3 * 4 * 8);
}

/// Found by `read_at` (OOM, 3.6 GB RSS; libFuzzer blamed an innocent empty
/// input): chunks declaring blocks of ~1.7 GB. A block's scratch buffers were
/// zero-filled to the declared size and kept by the thread afterwards, and a
/// spare buffer of that size was mapped in advance. Now blocks above the
/// format's maximum (`BLOSC2_MAXBLOCKSIZE`, as C-Blosc2 checks) are refused;
/// scratch buffers are mappings whose pages are only touched as written (and
/// large ones are given back after the block); spares too big to be kept are
/// not prepared. Here: a real zstd chunk whose header claims one block of
/// the maximum size, read through what the `read_at` target does.
#[test]
fn lying_block_size_maps_no_memory() {
    use blosc_decode::format::chunk::MAX_BLOCKSIZE;
    let mut data = std::fs::read(common::fixture(
        "chunk2/zstd-bytedelta-ts3-auto_split-counter.b2",
    ))
    .unwrap();
    let max = MAX_BLOCKSIZE.to_le_bytes();
    data[4..8].copy_from_slice(&max);
    data[8..12].copy_from_slice(&max);
    let ((), peak, kept) = memory_of(|| {
        for _ in 0..3 {
            fuzz_read_at(&data);
        }
    });
    assert!(
        peak < 64 << 20 && kept < 32 << 20,
        "a lying 512 MiB block cost memory: peak +{} MiB, kept +{} MiB",
        peak >> 20,
        kept >> 20
    );
    // One byte over the maximum is refused at the header.
    data[8..12].copy_from_slice(&(MAX_BLOCKSIZE + 1).to_le_bytes());
    let e = blosc_decode::format::chunk::ChunkHeader::parse(&data).unwrap_err();
    assert!(
        e.to_string().contains("exceeds the format's maximum"),
        "{e}"
    );
}

/// Found by `read_at` (slow unit): a 139-byte frame of variable
/// chunk sizes whose offsets index (a run-length chunk) declares 12,583,203
/// special chunks. The offsets were decoded (100 MB) and the whole chunk
/// table built (789 MB, 0.8 s in a release build) before the frame was
/// refused for holding more than one special chunk. A frame of variable
/// sizes keeps every chunk but one in its data, so the index may declare at
/// most one entry more than the data has room for chunk headers: checked on
/// the index's header, before anything is decoded.
#[test]
fn variable_frame_declaring_millions_of_special_chunks() {
    let data = input("frame-variable-many-specials.bin");
    let src = Arc::new(MemSource::new(data.clone()));
    let env = per_cpu(1 << 20);
    let (e, grew, _) =
        memory_of(|| refusal(blosc_decode::open_source(src, Path::new("regress"), &env)));
    assert!(
        e.contains("declares 12583203 chunks of variable size, but there is room for"),
        "{e}"
    );
    assert!(
        grew < 64 << 20,
        "refusing it raised peak RSS by {grew} bytes"
    );
    fuzz_read_at(&data);
}

/// Found while fixing the above (by hand, no fuzz input): a sparse frame
/// index may name a chunk file per chunk, and a fixed chunk size lets its
/// offsets be a run-length chunk of a few bytes. 2^24 - 1 entries all naming
/// `00000000.chunk` took 4.7 GB and 5 s to open (a source and a table entry
/// per chunk); here 2^20 of them opened. Now stored entries are bounded by
/// what the directory holds (twice its entries, plus 64).
#[test]
fn sframe_index_naming_more_chunk_files_than_the_directory_holds() {
    let _alone = alone();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("big.b2frame");
    common::copy(
        &common::root().join("tests/data/frame/sparse-fixed.b2frame"),
        &dir,
    );
    let index = dir.join("chunks.b2frame");
    let mut d = std::fs::read(&index).unwrap();
    // Header: 0x79 bytes; nbytes (msgpack int64) at 0x1e; chunk size 4000.
    // The offsets chunk (32-byte header, 40 bytes of offsets) becomes a
    // zeros chunk of n entries: every entry names chunk file 0.
    let (hl, n) = (0x79usize, 1u64 << 20);
    let mut chunk = d[hl..hl + 32].to_vec();
    chunk[4..8].copy_from_slice(&((8 * n) as u32).to_le_bytes());
    chunk[8..12].copy_from_slice(&(1u32 << 20).to_le_bytes());
    chunk[12..16].copy_from_slice(&32u32.to_le_bytes());
    chunk[31] = (chunk[31] & 0x0f) | 0x10;
    d.splice(hl..hl + 72, chunk);
    d[0x1e..0x26].copy_from_slice(&(n * 4000).to_be_bytes());
    let len = d.len() as u64;
    d[0x10..0x18].copy_from_slice(&len.to_be_bytes());
    std::fs::write(&index, &d).unwrap();
    let env = per_cpu(1 << 20);
    let e = refusal(blosc_decode::open_path_with(&dir, &env));
    assert!(
        e.contains("names more than 76 stored chunks, more than the frame has room for"),
        "{e}"
    );
    // The directory as written holds 5 chunks, and opens.
    common::copy(
        &common::root().join("tests/data/frame/sparse-fixed.b2frame"),
        &tmp.path().join("ok.b2frame"),
    );
    let c = blosc_decode::open_path_with(&tmp.path().join("ok.b2frame"), &env)
        .unwrap()
        .unwrap();
    assert_eq!(c.len(), 17200);
}

/// Found while bounding the above: python-blosc2 writes a 1 TiB frame of
/// 2^24 - 1 zero chunks of 64 KiB (`SChunk.fill_special`) in 172 bytes, a
/// legitimate file. Opening it decoded its offsets (128 MB) and built a
/// table entry per chunk: 1.3 GB and 0.8 s for `bloscfs info`. Now an
/// offsets index that is a special chunk is not expanded, and a run of
/// special chunks is one table entry.
#[test]
fn frame_of_millions_of_zero_chunks_is_one_entry() {
    let (c, grew, _) = memory_of(|| open_regress("frame-zeros-16m-chunks.b2frame").unwrap());
    assert_eq!(c.len(), ((1u64 << 24) - 1) * 65536);
    assert_eq!(c.info().nchunks, (1 << 24) - 1);
    assert_eq!(c.chunks().len(), 1);
    assert!(
        grew < 64 << 20,
        "opening it raised peak RSS by {grew} bytes"
    );
    let mut buf = vec![1u8; 100_000];
    for at in [0, 65_500, 1 << 39, c.len() - 100_000] {
        assert_eq!(c.read_at(at, &mut buf).unwrap(), buf.len());
        assert!(buf.iter().all(|&b| b == 0), "at {at}");
        buf.fill(1);
    }
    assert!(c.is_zero(12345, 1 << 30));
}

/// Found while bounding the above: C-Blosc2 writes NaN chunks of whole items,
/// and float32 chunks of 3 items (12 bytes) did not merge into one entry (a
/// NaN run merged only at multiples of 8 bytes): a table entry per chunk,
/// about 80 bytes each, for a file of a few bytes. Now a run stays one entry
/// while it is a whole number of its float's periods.
#[test]
fn nan_f32_chunks_of_12_bytes_are_one_entry() {
    let c = open_regress("frame-nan-f32-12-byte-chunks.b2frame").unwrap();
    assert_eq!(c.len(), 12 * 20000);
    assert_eq!(c.info().nchunks, 20000);
    assert_eq!(c.chunks().len(), 1);
    let nan = f32::NAN.to_le_bytes();
    for (at, n) in [
        (0u64, 12usize),
        (5, 31),
        (12 * 777 + 7, 4000),
        (c.len() - 9, 9),
    ] {
        let mut buf = vec![0u8; n];
        assert_eq!(c.read_at(at, &mut buf).unwrap(), n);
        for (k, b) in buf.iter().enumerate() {
            assert_eq!(*b, nan[((at + k as u64) % 4) as usize], "at {at} + {k}");
        }
    }
}

/// Zero and NaN chunks alternating (python-blosc2 appending the special
/// chunks C-Blosc2 makes): every change of kind is a table entry that takes
/// no room in the file, so an index alternating kinds over 2^24 chunks cost
/// about 1.4 GB. The changes are capped (`MAX_SPECIAL_CHANGES`); below
/// the cap such a frame reads exactly, above it the open is refused at once.
#[test]
fn special_chunks_alternating_kinds_are_capped() {
    let c = open_regress("frame-alternating-specials-1000.b2frame").unwrap();
    assert_eq!(c.len(), 1000 * 65536);
    assert_eq!(c.chunks().len(), 1000);
    let nan = f64::NAN.to_le_bytes();
    let mut buf = vec![0u8; 3 * 65536];
    let at = 65536 * 7 + 1000;
    assert_eq!(c.read_at(at, &mut buf).unwrap(), buf.len());
    for (k, b) in buf.iter().enumerate() {
        let pos = at + k as u64;
        let want = if (pos / 65536).is_multiple_of(2) {
            0
        } else {
            nan[(pos % 8) as usize]
        };
        assert_eq!(*b, want, "at {pos}");
    }

    const { assert!(68000 > blosc_decode::open::frame::MAX_SPECIAL_CHANGES) };
    let (e, grew, _) =
        memory_of(|| refusal(open_regress("frame-alternating-specials-68000.b2frame")));
    assert!(
        e.contains("special chunks change kind more than 65536 times"),
        "{e}"
    );
    assert!(
        grew < 64 << 20,
        "refusing it raised peak RSS by {grew} bytes"
    );
}

/// Found by `read_at` (OOM in fork mode): a 110-byte chunk of two
/// blocks of 372 and 195 MiB, with bitshuffle and shuffle. A stream's size
/// of -1157627842 was taken as a run of one byte (C-Blosc2 refuses a run
/// below -255: its size is minus the byte repeated), so block 0 decoded:
/// 372 MiB of one byte through two filters took three buffers of the block
/// (the output and two scratch buffers, 1.1 GB), and two threads decoding
/// blocks at once (the reader and the decode-ahead pool, or `bloscfs cat`'s
/// workers) passed libFuzzer's 2 GB (`bloscfs cat`: 2.3 GB). Now such a size
/// is refused, a block's filters go back and forth between the output and
/// one scratch buffer, and blocks above 64 MiB are decoded one at a time.
#[test]
fn run_size_below_minus_255_is_refused() {
    let (r, peak, _) = memory_of(|| {
        let c = open_regress("chunk-run-size-below-minus-255.bin").unwrap();
        let mut buf = vec![0u8; 4096];
        c.read_at(0, &mut buf).map_err(|e| e.to_string())
    });
    let e = r.unwrap_err();
    assert!(
        e.contains("block 0: stream 0: size -1157627842 is not a run's"),
        "{e}"
    );
    assert!(
        peak < 64 << 20,
        "refusing it raised peak RSS by {peak} bytes"
    );
}

/// The same through legitimate runs (C-Blosc2 decodes this chunk to the
/// same bytes): two blocks of 256 MiB, each a run of one byte through
/// bitshuffle and shuffle, read by two threads at once. Each decode touches
/// twice its block (output and one scratch buffer), and the two take turns:
/// about 512 MiB in all, where three buffers each at once took 1.5 GiB.
#[test]
fn two_threads_decoding_256_mib_blocks_take_turns() {
    let c = open_regress("chunk-two-256mib-run-blocks.bin").unwrap();
    const BLOCK: u64 = 256 << 20;
    assert_eq!(c.len(), 2 * BLOCK);
    let start = std::sync::Barrier::new(2);
    let (got, peak, kept) = memory_of(|| {
        std::thread::scope(|s| {
            let reads: Vec<_> = [(BLOCK - 5, 0xc2u8), (2 * BLOCK - 5, 0x11)]
                .into_iter()
                .map(|(at, byte)| {
                    let (c, start) = (&c, &start);
                    s.spawn(move || {
                        let mut buf = [0u8; 5];
                        start.wait();
                        c.read_at(at, &mut buf).unwrap();
                        (buf, byte)
                    })
                })
                .collect();
            reads
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        })
    });
    // A run of one byte, bit-unshuffled (element size 1: each byte's bits
    // spread over 8 bytes) then unshuffled (a copy at size 1).
    for (buf, byte) in got {
        let want: Vec<u8> = (3..8)
            .map(|k| if byte >> k & 1 == 1 { 0xff } else { 0 })
            .collect();
        assert_eq!(buf[..], want[..], "run of {byte:#x}");
    }
    assert!(
        peak < 2 * BLOCK + BLOCK / 2,
        "two 256 MiB blocks decoded at once took {} MiB",
        peak >> 20
    );
    assert!(kept < 32 << 20, "kept {} MiB", kept >> 20);
}
