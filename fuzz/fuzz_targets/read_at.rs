//! Any bytes, detected and opened as a container, read whole and at an
//! arbitrary window: must never panic, hang or allocate without bound.
//!
//! The input is the file itself, unchanged, so the fixtures seed it as they
//! are (decoding `(u64, u16, Vec<u8>)` with `arbitrary` would eat the first
//! 10 bytes of every seed, and no seed would be detected as a container).
//! The window is taken from the file's last 10 bytes: offset
//! (u64, modulo the length + 1), then length (u16).
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// One pool for every input (a pool per input would start threads for each).
fn pool() -> Arc<bloscfs_pool::Pool> {
    static POOL: OnceLock<Arc<bloscfs_pool::Pool>> = OnceLock::new();
    POOL.get_or_init(|| Arc::new(bloscfs_pool::Pool::new(2)))
        .clone()
}

fuzz_target!(|data: &[u8]| {
    let (off, len) = match data.len().checked_sub(10) {
        Some(k) => (
            u64::from_le_bytes(data[k..k + 8].try_into().unwrap()),
            u16::from_le_bytes([data[k + 8], data[k + 9]]),
        ),
        None => (0, 4096),
    };
    let src = Arc::new(blosc_decode::io::MemSource::new(data.to_vec()));
    let mut env = blosc_decode::Env::with_runner(1 << 20, pool());
    // An odd window length also turns decode-ahead on (16 KiB spans): the
    // whole read, in sequential steps, then queues the following spans, and
    // the window read meets them.
    let ahead = len & 1 == 1;
    if ahead {
        env.decode_ahead = blosc_decode::DecodeAhead::Fixed(256 << 10);
        env.span = 16 << 10;
    }
    if let Ok(Some(c)) = blosc_decode::open_source(src, Path::new("fuzz-input"), &env) {
        let c = Arc::new(c);
        let stream = blosc_decode::Stream::new();
        // A read as the FUSE adapter makes it, with decoding ahead.
        let shared = |at: u64, buf: &mut [u8]| -> blosc_decode::Result<usize> {
            let mut later = blosc_decode::Deferred::new();
            let r = c.read_shared(&stream, at, buf, &mut later)?;
            let n = match r {
                blosc_decode::Served::Buf(n) => n,
                blosc_decode::Served::Shared(b, range) => {
                    buf[..range.len()].copy_from_slice(&b[range.clone()]);
                    range.len()
                }
            };
            later.run();
            Ok(n)
        };
        let read_whole = |whole: &mut [u8]| -> bool {
            if !ahead {
                return c.read_at(0, whole).is_ok();
            }
            let mut off = 0;
            while off < whole.len() {
                let end = (off + 20_000).min(whole.len());
                match shared(off as u64, &mut whole[off..end]) {
                    Ok(n) if n > 0 => off += n,
                    Ok(_) => return true,
                    Err(_) => return false,
                }
            }
            true
        };
        let total = c.len();
        let mut whole = vec![0u8; total.min(1 << 20) as usize];
        let at = off % total.saturating_add(1);
        let mut window = vec![0u8; len as usize];
        // Bit 1 of the length: read the window as the FUSE adapter does, the
        // rest of a partly read block cached after the "reply" (`Deferred`).
        let read_window = |window: &mut [u8]| {
            if ahead {
                shared(at, window)
            } else if len & 2 == 2 {
                let mut later = blosc_decode::Deferred::new();
                let r = c.read_at_deferring(at, window, &mut later);
                later.run();
                r
            } else {
                c.read_at(at, window)
            }
        };
        // Bit 2: the window first, a far first read (nothing before it read
        // yet: chunk sizes a frame assumes are checked on the way).
        let (whole_ok, r) = if len & 4 == 4 {
            let r = read_window(&mut window);
            (read_whole(&mut whole), r)
        } else {
            let ok = read_whole(&mut whole);
            (ok, read_window(&mut window))
        };
        if let Ok(n) = r {
            // A range the index calls all zero chunks must read as zeros
            // (reads of it are answered without decoding anything).
            if c.is_zero(at, n as u64) {
                assert!(window[..n].iter().all(|&b| b == 0), "is_zero but not zeros");
            }
            // The same bytes as the whole read (whole blocks, another path).
            let end = at as usize + n;
            if whole_ok && end <= whole.len() {
                assert!(window[..n] == whole[at as usize..end], "window differs from the whole read");
            }
        }
    }
});
