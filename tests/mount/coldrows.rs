//! Cold rows and planes of `.npy` views through a real mount: what the
//! kernel asks for when `np.load(mmap_mode="r")[i]` faults a row or a
//! plane in, and that the daemon decodes exactly the blocks those requests
//! intersect (`user.bloscfs.stats`), no more. The arrays are laid out as
//! python-blosc2 lays out its defaults: chunks of whole trailing
//! dimensions, blocks of whole rows (2-D) or of rows of one plane (3-D),
//! so each block is one contiguous stretch of the C-order bytes.

use crate::ahead::stat;
use crate::common::*;
use crate::mount::Mount;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Run `code` with python-blosc2; its standard output.
fn py(code: &str) -> String {
    let py = python().expect("python with blosc2 (scripts/setup.sh)");
    let o = Command::new(&py).arg("-c").arg(code).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Write `name.b2nd` into the source: linspace values of `dtype` in
/// `shape`, with `chunks` and `blocks`; its block size in bytes.
fn array(m: &Mount, name: &str, shape: &str, chunks: &str, blocks: &str, dtype: &str) -> u64 {
    let out = py(&format!(
        "import numpy as np, blosc2\n\
         s = {shape}\n\
         x = np.linspace(0, 1, int(np.prod(s)), dtype='{dtype}').reshape(s)\n\
         a = blosc2.asarray(x, urlpath='{src}/{name}.b2nd', mode='w', chunks={chunks}, blocks={blocks})\n\
         print(int(np.prod(a.blocks)) * a.dtype.itemsize)\n",
        src = m.src().display()
    ));
    out.trim().parse().unwrap()
}

/// Slab `i` (a row or a plane) of `name.npy` through the mount, by
/// `np.load(mmap_mode="r")[i]` as a user reads it, checked against
/// python-blosc2's own slice of the source.
fn read_slab(m: &Mount, name: &str, i: usize) {
    let out = py(&format!(
        "import numpy as np, blosc2\n\
         mm = np.load('{mp}/{name}.npy', mmap_mode='r')\n\
         got = np.array(mm[{i}])\n\
         del mm\n\
         print((got == blosc2.open('{src}/{name}.b2nd')[{i}]).all())\n",
        mp = m.mp().display(),
        src = m.src().display()
    ));
    assert_eq!(out.trim(), "True", "slab {i} of {name}.npy");
}

/// The `.npy` header's length: magic, version 1.0, its 2-byte length.
fn header_len(path: &Path) -> u64 {
    let mut f = std::fs::File::open(path).unwrap();
    let mut h = [0u8; 10];
    std::io::Read::read_exact(&mut f, &mut h).unwrap();
    assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
    10 + u64::from(u16::from_le_bytes([h[8], h[9]]))
}

/// The READ requests (offset, size) in the daemon's debug log.
fn requests(log: &Path) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines()
        .filter_map(|l| l.split_once("read(")?.1.strip_suffix(')'))
        .filter_map(|args| {
            let v: Vec<&str> = args.split(", ").collect();
            match v[..] {
                [_, fh, off, size] if fh.starts_with("fh ") => {
                    Some((off.parse().ok()?, size.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect()
}

/// The blocks (numbered in C order) that requests `reqs` of the `.npy`
/// touch: each request's bytes past the header, up to the data's end.
fn blocks_of(reqs: &[(u64, u64)], hdr: u64, data: u64, block: u64) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    for &(off, size) in reqs {
        let lo = off.max(hdr) - hdr;
        let hi = (off + size).min(hdr + data).saturating_sub(hdr);
        if hi > lo {
            out.extend(lo / block..=(hi - 1) / block);
        }
    }
    out
}

/// What one cold slab read costs: the requests the kernel sent for the
/// slab (after the header's, and past it), the blocks they touch, the
/// blocks decoded.
struct Cost {
    slab_requests: Vec<(u64, u64)>,
    touched: BTreeSet<u64>,
    decoded: u64,
    slab_blocks: BTreeSet<u64>,
}

/// Mount with the debug log, read slab `i` (of `slab` bytes) of `name`
/// cold, and account for it. No decoding ahead: only what is asked.
fn cold_slab(name: &str, make: impl Fn(&Mount) -> u64, i: u64, slab: u64, data: u64) -> Cost {
    let m = Mount::prepare();
    let block = make(&m);
    let opts = ["-d", "-o", "xattr,decode_ahead=0,readahead=1M"];
    let (mut m, log) = m.mount_logged(&opts);
    let npy = m.mp().join(format!("{name}.npy"));
    let hdr = header_len(&npy);
    let before = requests(&log).len();
    read_slab(&m, name, i as usize);
    let decoded = stat(&m.mp(), "blocks_decoded");
    m.unmount_without_panic(&log);
    let all = requests(&log);
    let slab_blocks = blocks_of(&[(hdr + i * slab, slab)], hdr, data, block);
    Cost {
        // The slab's requests: those past the header (`np.load` reads the
        // header again on its own open, which drops the page cache).
        slab_requests: all[before..]
            .iter()
            .copied()
            .filter(|r| r.0 >= hdr)
            .collect(),
        touched: blocks_of(&all, hdr, data, block),
        decoded,
        slab_blocks,
    }
}

/// A row of a 2-D float64 array in blocks of two rows: the kernel asks
/// for a read-around window of the mount's read-ahead around the faulting
/// page (and the header's first pages); the daemon decodes exactly the
/// blocks those requests touch, the row's among them.
#[test]
fn a_cold_row_decodes_exactly_the_blocks_the_kernel_asks_for() {
    if !fuse_available() {
        return;
    }
    let (rows, cols) = (512u64, 4096u64);
    let make = |m: &Mount| array(m, "grid", "(512, 4096)", "(64, 4096)", "(2, 4096)", "f8");
    let c = cold_slab("grid", make, 257, cols * 8, rows * cols * 8);
    assert!(c.slab_blocks.is_subset(&c.touched), "{:?}", c.touched);
    assert_eq!(c.decoded, c.touched.len() as u64, "blocks {:?}", c.touched);
    // The row is 32 KiB; the kernel's window around its fault is larger
    // (at most the read-ahead), never more than two windows.
    let asked: u64 = c.slab_requests.iter().map(|r| r.1).sum();
    assert!(asked >= cols * 8, "{:?}", c.slab_requests);
    assert!(asked <= 2 << 20, "{:?}", c.slab_requests);
}

/// A plane of a 3-D float32 array in blocks of 64 rows of a plane (as
/// python-blosc2's defaults for 256x512x512): the kernel's requests cover
/// the plane in windows of at most the read-ahead, and the daemon decodes
/// exactly the blocks they touch.
#[test]
fn a_cold_plane_decodes_exactly_the_blocks_the_kernel_asks_for() {
    if !fuse_available() {
        return;
    }
    let plane = 512u64 * 512 * 4;
    let make = |m: &Mount| {
        array(
            m,
            "stack",
            "(32, 512, 512)",
            "(8, 512, 512)",
            "(1, 64, 512)",
            "f4",
        )
    };
    let c = cold_slab("stack", make, 17, plane, 32 * plane);
    assert_eq!(c.slab_blocks.len(), 8);
    assert!(c.slab_blocks.is_subset(&c.touched), "{:?}", c.touched);
    assert_eq!(c.decoded, c.touched.len() as u64, "blocks {:?}", c.touched);
    assert!(
        c.slab_requests.iter().all(|r| r.1 <= 1 << 20),
        "{:?}",
        c.slab_requests
    );
    let asked: u64 = c.slab_requests.iter().map(|r| r.1).sum();
    assert!(
        asked >= plane && asked <= plane + (2 << 20),
        "{:?}",
        c.slab_requests
    );
}

/// `np.load`'s read of the `.npy` header, the first read after the mount:
/// Python reads it in one buffer of the file's `st_blksize`, which a
/// container gives as one page, so the kernel's first window is small
/// (16 KiB) and only the first block is decoded. (With a buffer of
/// 128 KiB the kernel asks for 256 KiB: four blocks of 64 KiB here.)
#[test]
fn the_npy_header_read_decodes_one_block() {
    if !fuse_available() {
        return;
    }
    let m = Mount::prepare();
    let block = array(&m, "grid", "(512, 4096)", "(64, 4096)", "(2, 4096)", "f8");
    let opts = ["-d", "-o", "xattr,decode_ahead=0,readahead=1M"];
    let (mut m, log) = m.mount_logged(&opts);
    let before = requests(&log).len();
    let out = py(&format!(
        "import numpy as np, os\n\
         p = '{mp}/grid.npy'\n\
         print(os.stat(p).st_blksize)\n\
         with open(p, 'rb') as f:\n\
         \x20   assert np.lib.format.read_magic(f) == (1, 0)\n\
         \x20   print(np.lib.format.read_array_header_1_0(f)[0])\n",
        mp = m.mp().display()
    ));
    let decoded = stat(&m.mp(), "blocks_decoded");
    m.unmount_without_panic(&log);
    let asked = requests(&log)[before..].to_vec();
    assert_eq!(asked.first().map(|r| r.0), Some(0), "{asked:?}");
    assert!(
        asked.iter().map(|r| r.1).sum::<u64>() <= 16 << 10,
        "{asked:?}"
    );
    assert!(block >= 16 << 10);
    assert_eq!(decoded, 1);
    let out: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(out, ["4096", "(512,", "4096)"]);
}

/// The daemon's minor page faults so far and its threads (`/proc/<pid>`).
fn faults_and_threads(pid: u32) -> (u64, usize) {
    let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = st.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    (f[7].parse().unwrap(), tasks.count())
}

/// `grid` (python-blosc2's default layout for a 2-D float64 array: blocks
/// of two rows of 128 KiB) mounted with the debug log and `opts`, its
/// `.npy` header read: once it is, the mount has answered (its FUSE
/// workers run).
fn grid_mounted(opts: &str) -> (Mount, std::path::PathBuf) {
    let m = Mount::prepare();
    array(&m, "grid", "(512, 8192)", "(64, 8192)", "(2, 8192)", "f8");
    let (m, log) = m.mount_logged(&["-d", "-o", opts]);
    header_len(&m.mp().join("grid.npy"));
    (m, log)
}

/// The first cold row after the mount (python-blosc2's default layout for
/// a 2-D float64 array: blocks of two rows of 128 KiB): one 1 MiB request
/// of nine blocks, decoded in parallel. Every thread of the daemon was
/// started with the mount (none is spawned on the row's path), and the
/// reply buffer was mapped then: the row's page faults (block buffers)
/// are fewer than the 256 pages of that buffer alone.
#[test]
fn the_first_cold_row_spawns_no_thread_and_maps_no_reply_buffer() {
    if !fuse_available() {
        return;
    }
    let (mut m, log) = grid_mounted("xattr,readahead=1M");
    let pid = m.child.as_ref().unwrap().id();
    let (faults, threads) = faults_and_threads(pid);
    let before = requests(&log).len();
    read_slab(&m, "grid", 257);
    let after = faults_and_threads(pid);
    let decoded = stat(&m.mp(), "blocks_decoded");
    m.unmount_without_panic(&log);
    let big: Vec<_> = requests(&log)[before..]
        .iter()
        .copied()
        .filter(|r| r.1 == 1 << 20)
        .collect();
    assert_eq!(big.len(), 1, "{:?}", requests(&log));
    assert!(decoded >= 9, "{decoded} blocks decoded");
    assert_eq!(after.1, threads, "threads started on the read path");
    let row = after.0 - faults;
    assert!(row < 256, "{row} page faults for the row");
}

/// With `-o max_read=512K`, the mmap fault's 1 MiB read-around window of
/// a cold row comes as two requests of 512 KiB, one after the other in
/// the file, the nine blocks decoded between them.
#[test]
fn with_max_read_512k_a_row_s_window_comes_as_two_requests() {
    if !fuse_available() {
        return;
    }
    let (mut m, log) = grid_mounted("xattr,readahead=1M,max_read=512K");
    let before = requests(&log).len();
    read_slab(&m, "grid", 257);
    let decoded = stat(&m.mp(), "blocks_decoded");
    m.unmount_without_panic(&log);
    let asked = requests(&log)[before..].to_vec();
    assert!(asked.iter().all(|r| r.1 <= 512 << 10), "{asked:?}");
    let big: Vec<_> = asked.iter().filter(|r| r.1 == 512 << 10).collect();
    assert_eq!(big.len(), 2, "{asked:?}");
    assert_eq!(big[0].0 + (512 << 10), big[1].0, "{asked:?}");
    assert!(decoded >= 9, "{decoded} blocks decoded");
}

/// Cold `pread`s of `grid.npy` (512x4096 float64, blocks of two rows of
/// 32 KiB) with the reader's read-ahead off, each `len` bytes at `at(k)`
/// for `k` in `ks`, checked against np.linspace's values: the READ
/// requests the kernel sent for them, the blocks decoded, the header's
/// length.
fn cold_preads(
    ks: &[u64],
    len: usize,
    at: impl Fn(u64, u64) -> u64,
) -> (Vec<(u64, u64)>, u64, u64) {
    use std::os::unix::fs::FileExt;
    use std::os::unix::io::AsRawFd;
    let m = Mount::prepare();
    let block = array(&m, "grid", "(512, 4096)", "(64, 4096)", "(2, 4096)", "f8");
    assert_eq!(block, 64 << 10);
    let opts = ["-d", "-o", "xattr,decode_ahead=0,readahead=1M"];
    let (mut m, log) = m.mount_logged(&opts);
    let npy = m.mp().join("grid.npy");
    let hdr = header_len(&npy);
    let f = std::fs::File::open(&npy).unwrap();
    // SAFETY: a valid descriptor; advice only (no read-ahead).
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    let before = (requests(&log).len(), stat(&m.mp(), "blocks_decoded"));
    let mut buf = vec![0u8; len];
    // np.linspace's elements: the index times the step.
    let step = 1.0 / (512.0 * 4096.0 - 1.0);
    for &k in ks {
        let off = at(hdr, k);
        f.read_exact_at(&mut buf, off).unwrap();
        let e = (off - hdr) / 8;
        let v = f64::from_le_bytes(buf[..8].try_into().unwrap());
        assert_eq!(v, e as f64 * step, "element {e}");
    }
    let decoded = stat(&m.mp(), "blocks_decoded") - before.1;
    drop(f);
    m.unmount_without_panic(&log);
    (requests(&log)[before.0..].to_vec(), decoded, hdr)
}

/// A 4 KiB read at an element offset of a `.npy` (as a C program reads
/// element `k * 512` of a float64 array: at the header's length plus
/// `k * 4096`) is one page of the file, because the header is padded to a
/// page: the kernel asks for that page alone, and one block is decoded.
/// (With numpy's 128-byte header each such read was two pages, 8 KiB.)
#[test]
fn a_4k_read_at_an_element_offset_is_one_page_and_one_block() {
    if !fuse_available() {
        return;
    }
    let pages = [301u64, 37, 150, 990];
    let (asked, decoded, hdr) = cold_preads(&pages, 4096, |hdr, k| hdr + k * 4096);
    assert_eq!(hdr, 4096);
    let want: Vec<(u64, u64)> = pages.iter().map(|k| (hdr + k * 4096, 4096)).collect();
    assert_eq!(asked, want);
    // Each page in a block no other page is in (blocks of 16 pages).
    assert_eq!(decoded, pages.len() as u64);
}

/// A row read whole (one `pread` of its 32 KiB) with the reader's
/// read-ahead off: the kernel asks for the row's pages alone, and the
/// blocks decoded are the block the row is in, none beside it, for rows
/// that start a block (100, 4) and rows that end one (301, 451). (With
/// numpy's 128-byte header the row's first page held the end of the row
/// before, its last page the start of the row after: two blocks each.)
#[test]
fn a_one_row_read_decodes_exactly_the_row_s_block() {
    if !fuse_available() {
        return;
    }
    let rows = [100u64, 301, 4, 451];
    let row = 4096 * 8;
    let (asked, decoded, hdr) = cold_preads(&rows, row as usize, |hdr, i| hdr + i * row);
    let want: Vec<(u64, u64)> = rows.iter().map(|i| (hdr + i * row, row)).collect();
    assert_eq!(asked, want);
    let blocks = blocks_of(&want, hdr, 512 * row, 2 * row);
    assert_eq!(blocks.len(), rows.len());
    assert_eq!(decoded, blocks.len() as u64);
}
