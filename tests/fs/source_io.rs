//! `-o source_io`: the daemon's local sources (`bloscfs::local`) read the
//! reference fixtures exactly with every block read bypassing the page
//! cache (`O_DIRECT`, where the file system allows it: aligned reads, spans
//! at any offset, short reads at the end of the file), with reads through
//! it, and in the automatic mode.

use crate::common::*;
use blosc_decode::io::Access;
use blosc_decode::Env;
use sha2::{Digest, Sha256};

/// Every decodable fixture of the manifest, opened by the daemon's
/// `open_path` with `source_io` set to `io`, read whole and in odd pieces.
fn matrix(io: Access) {
    let text = std::fs::read_to_string(fixtures().join("manifest.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut env = per_cpu(16 << 20);
    env.source_io = io;
    let mut checked = 0;
    for f in v["fixtures"].as_array().unwrap() {
        if f["expect"] != "ok" {
            continue;
        }
        let rel = f["path"].as_str().unwrap();
        let c = bloscfs::local::open_path(&fixture(rel), &env)
            .unwrap_or_else(|e| panic!("{rel} ({io:?}): {e}"))
            .unwrap_or_else(|| panic!("{rel}: not a container"));
        let mut whole = vec![0u8; c.len() as usize];
        let mut at = 0;
        // Pieces of 1, 4097, 12289 ... bytes: most start and end unaligned.
        let mut piece = 1;
        while at < whole.len() {
            let end = (at + piece).min(whole.len());
            assert_eq!(c.read_at(at as u64, &mut whole[at..end]).unwrap(), end - at);
            at = end;
            piece = piece * 3 + 4094;
        }
        let whole = crate::common::as_numpy_saves(&whole);
        assert_eq!(whole.len() as u64, f["len"].as_u64().unwrap(), "{rel}");
        assert_eq!(
            format!("{:x}", Sha256::digest(&whole)),
            f["sha256"].as_str().unwrap(),
            "{rel} ({io:?})"
        );
        checked += 1;
    }
    assert!(checked >= 100, "only {checked} fixtures");
}

#[test]
fn reference_fixtures_read_exact_with_direct_source_io() {
    matrix(Access::Direct);
}

#[test]
fn reference_fixtures_read_exact_with_buffered_and_auto_source_io() {
    matrix(Access::Buffered);
    matrix(Access::Auto);
}

/// The decoder's own `FileSource` never bypasses the page cache, whatever
/// `source_io` says: bypassing it is the daemon's.
#[test]
fn the_library_alone_reads_through_the_page_cache() {
    let mut env = Env::new(16 << 20);
    env.source_io = Access::Direct;
    let rel = "frame/blocks-lz4.b2frame";
    let c = blosc_decode::open_path_with(&fixture(rel), &env)
        .unwrap()
        .unwrap();
    let mut buf = vec![0u8; c.len() as usize];
    c.read_at(0, &mut buf).unwrap();
    assert_eq!(buf, reference_bytes(rel));
    let direct = &env.stats.source_direct_reads;
    assert_eq!(direct.load(std::sync::atomic::Ordering::Relaxed), 0);
}
