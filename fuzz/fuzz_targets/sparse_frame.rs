//! A sparse frame (a directory holding a `chunks.b2frame` index and
//! `%08X.chunk` files) built from arbitrary bytes, detected, opened and read
//! through the public API (`detect::probe_path`, `open_path_with`).
//!
//! Input: parts separated by `SEP`; the first is the index file, the next
//! ones (at most `MAX_CHUNKS`) are `00000000.chunk`, `00000001.chunk`, ...
//! Seeds are the sparse-frame fixtures joined that way (scripts/fuzz/run.sh).
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

const SEP: &[u8] = b"\n--chunk--\n";
const MAX_CHUNKS: usize = 8;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // Files are rewritten every run: on tmpfs that is several times
        // faster than on a journaling /tmp.
        let shm = std::path::Path::new("/dev/shm");
        let base = match std::env::var_os("TMPDIR") {
            None if shm.is_dir() => shm.to_path_buf(),
            _ => std::env::temp_dir(),
        };
        let d = base.join(format!("bloscfs-fuzz-sframe-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while parts.len() < MAX_CHUNKS {
        match rest.windows(SEP.len()).position(|w| w == SEP) {
            Some(i) => {
                parts.push(&rest[..i]);
                rest = &rest[i + SEP.len()..];
            }
            None => break,
        }
    }
    parts.push(rest);
    parts
}

fuzz_target!(|data: &[u8]| {
    let d = dir();
    // Recreated if gone (a cleanup of /dev/shm by a concurrent campaign
    // script once made a write here fail and look like a crash).
    std::fs::create_dir_all(d).unwrap();
    let parts = split(data);
    std::fs::write(d.join("chunks.b2frame"), parts[0]).unwrap();
    for i in 0..MAX_CHUNKS {
        let p = d.join(format!("{i:08X}.chunk"));
        match parts.get(i + 1) {
            Some(c) => std::fs::write(&p, c).unwrap(),
            None => {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
    let _ = blosc_decode::detect::probe_path(d);
    let env = blosc_decode::Env::new(1 << 20);
    if let Ok(Some(c)) = blosc_decode::open_path_with(d, &env) {
        let total = c.len();
        let mut whole = vec![0u8; total.min(1 << 20) as usize];
        let _ = c.read_at(0, &mut whole);
        let mut window = vec![0u8; 4096];
        let _ = c.read_at(total / 3, &mut window);
        let _ = c.read_at(total.saturating_sub(100), &mut window);
    }
});
