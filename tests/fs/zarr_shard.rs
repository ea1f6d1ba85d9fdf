//! Sharded Zarr v3 arrays (`sharded.zarr` of zarr-python 3.1.6,
//! scripts/fixtures/gen_zarr.py) with lying or damaged shard indexes: each
//! inner chunk whose index entry runs past the shard file, into its index,
//! or claims a huge size fails with EIO, and only that inner chunk; a
//! shard whose index checksum is wrong or that is shorter than its index
//! fails with EIO, and only that shard; so does an inner shard of a nested
//! one. `bloscfs info` describes the shards.

use crate::common;
use bloscfs::fs::{Fs, FsOptions, ROOT_INO};
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

const W: &str = "zarr/z3-3.1.6";

/// A copy of array `name` of `sharded.zarr`, with its expected `.npy`.
fn copied(name: &str) -> (tempfile::TempDir, Vec<u8>) {
    let tmp = tempfile::tempdir().unwrap();
    let from = common::fixture(&format!("{W}/stores/sharded.zarr/{name}"));
    common::copy(&from, &tmp.path().join(name));
    let want = std::fs::read(common::fixture(&format!(
        "{W}/expected/sharded.zarr/{name}.npy"
    )));
    (tmp, common::as_bloscfs_shows(&want.unwrap()))
}

/// Reads of the values of the `.npy` of the array copied into `dir`:
/// `read(i)` gives element `i` (C order) or the errno.
struct Npy {
    fs: Fs,
    fh: u64,
    header: u64,
    size: u64,
}

impl Npy {
    fn open(dir: &Path, name: &str, want: &[u8], size: u64) -> Npy {
        let fs = Fs::new(dir, &FsOptions::default()).unwrap();
        let ino = fs
            .lookup(ROOT_INO, OsStr::new(&format!("{name}.npy")))
            .unwrap()
            .ino;
        let (fh, _) = fs.open(ino, false).unwrap();
        let header = want.iter().position(|&b| b == b'\n').unwrap() as u64 + 1;
        Npy {
            fs,
            fh,
            header,
            size,
        }
    }

    fn read(&self, i: u64) -> Result<Vec<u8>, i32> {
        let at = self.header + i * self.size;
        self.fs
            .read(self.fh, at, self.size as u32)
            .map_err(|e| e.errno())
    }

    /// Element `i` reads as in `want`.
    fn good(&self, want: &[u8], i: u64) {
        let at = (self.header + i * self.size) as usize;
        assert_eq!(
            self.read(i),
            Ok(want[at..at + self.size as usize].to_vec()),
            "element {i}"
        );
    }
}

/// Entry `i` of the big-endian index (at the start) of a shard file.
fn set_entry(bytes: &mut [u8], i: usize, off: u64, nbytes: u64) {
    bytes[16 * i..16 * i + 8].copy_from_slice(&off.to_be_bytes());
    bytes[16 * i + 8..16 * i + 16].copy_from_slice(&nbytes.to_be_bytes());
}

#[test]
fn a_lying_index_entry_fails_only_its_inner_chunk() {
    // bigindex: 7x5 uint16, shards of 4x6 holding 2x2 inner chunks of 2x3,
    // the index (big-endian, no checksum) at the start of each shard.
    let (tmp, want) = copied("bigindex");
    let shard = tmp.path().join("bigindex/c/0/0");
    let mut b = std::fs::read(&shard).unwrap();
    let len = b.len() as u64;
    let entry =
        |b: &[u8], i: usize| u64::from_be_bytes(b[16 * i + 8..16 * i + 16].try_into().unwrap());
    let n0 = entry(&b, 0);
    set_entry(&mut b, 0, len, n0); // past the end of the file
    let n1 = entry(&b, 1);
    set_entry(&mut b, 1, 0, n1); // over the index
    set_entry(&mut b, 2, 64, u64::MAX - 8); // a huge size
    std::fs::write(&shard, &b).unwrap();
    let npy = Npy::open(tmp.path(), "bigindex", &want, 2);
    // Elements (0, 0), (0, 3), (2, 0): inner chunks 0, 1, 2 of shard (0, 0).
    for i in [0, 3, 10] {
        assert_eq!(npy.read(i), Err(libc::EIO), "element {i}");
    }
    // Inner chunk 3 of that shard, and the other shard.
    for i in [13, 14, 19, 20, 25, 34] {
        npy.good(&want, i);
    }
}

#[test]
fn a_damaged_shard_fails_only_itself() {
    // end: 10x9 int32, shards of 4x6, the index (crc32c) at the end; shard
    // (1, *) was never written.
    let (tmp, want) = copied("end");
    let crc = tmp.path().join("end/c/0/0");
    let mut b = std::fs::read(&crc).unwrap();
    *b.last_mut().unwrap() ^= 1;
    std::fs::write(&crc, &b).unwrap();
    let short = tmp.path().join("end/c/0/1");
    let b = std::fs::read(&short).unwrap();
    std::fs::write(&short, &b[..10]).unwrap();
    let npy = Npy::open(tmp.path(), "end", &want, 4);
    // (0, 0) and (3, 5) in shard (0, 0); (0, 6) and (3, 8) in shard (0, 1).
    for i in [0, 32, 6, 35] {
        assert_eq!(npy.read(i), Err(libc::EIO), "element {i}");
    }
    // Shard (1, 0) (never written: the fill value), shard (2, 0) and (2, 1).
    for i in [36, 45, 72, 81, 86, 89] {
        npy.good(&want, i);
    }
}

#[test]
fn info_describes_the_shards() {
    for (name, line) in [
        (
            "start",
            "shards: (4, 4, 4) of (2, 2, 1) inner chunks, index at the start, crc32c",
        ),
        (
            "end",
            "shards: (4, 6) of (2, 2) inner chunks, index at the end, crc32c",
        ),
        (
            "bigindex",
            "shards: (4, 6) of (2, 2) inner chunks, index at the start, big-endian\n",
        ),
        (
            "nested",
            "  chunks: (2, 2) (8 bytes each)\n  \
             shards: (8, 8) of (2, 2) inner chunks, index at the start, crc32c\n  \
             inner shards: (4, 4) of (2, 2) inner chunks, index at the end, crc32c\n",
        ),
    ] {
        let dir = common::fixture(&format!("{W}/stores/sharded.zarr/{name}"));
        let o = Command::new(common::bin())
            .arg("info")
            .arg(&dir)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && text.contains(line), "{name}: {text}");
    }
}

#[test]
fn a_damaged_inner_shard_fails_only_itself() {
    // nested: 13x10 uint16 in shards of 8x8 (index at the start, crc32c)
    // of 2x2 inner shards of 4x4 (index at the end, crc32c) of 2x2 chunks.
    let (tmp, want) = copied("nested");
    let shard = tmp.path().join("nested/c/0/0");
    let mut b = std::fs::read(&shard).unwrap();
    // The outer index's entry 0: where inner shard 0 lies; its last byte
    // is its index's checksum (the outer index's own stays right).
    let off = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    let nb = u64::from_le_bytes(b[8..16].try_into().unwrap()) as usize;
    b[off + nb - 1] ^= 1;
    std::fs::write(&shard, &b).unwrap();
    let npy = Npy::open(tmp.path(), "nested", &want, 2);
    // (0, 0) and (3, 3): inner shard 0 of shard (0, 0).
    for i in [0, 33] {
        assert_eq!(npy.read(i), Err(libc::EIO), "element {i}");
    }
    // Inner shard 1 of that shard, (4, 0) in inner shard 2, and the other
    // shards.
    for i in [4, 25, 40, 98, 120, 129] {
        npy.good(&want, i);
    }
}
