//! The reply buffers of the FUSE worker threads, mapped when the mount
//! starts: the first large read of a fresh mount (a row faulted in through
//! `mmap`: one 1 MiB request) would otherwise page-fault its reply buffer
//! in, 256 faults of 4 KiB on the request's path.

use std::cell::RefCell;
use std::sync::Mutex;

/// The largest READ the kernel sends (256 pages, `max_pages`); a larger
/// one grows its thread's buffer.
pub const REQUEST_MAX: usize = 1 << 20;

/// Buffers made by [`prepare`], each taken by one worker thread.
static READY: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

thread_local! {
    static READBUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Make `threads` buffers of [`REQUEST_MAX`] bytes with their pages
/// mapped, for the worker threads to take on their first read.
pub fn prepare(threads: usize) {
    let made: Vec<Vec<u8>> = (0..threads).map(|_| mapped(REQUEST_MAX)).collect();
    if let Ok(mut r) = READY.lock() {
        r.extend(made);
    }
}

/// `len` zero bytes whose pages are all mapped.
fn mapped(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let page = blosc_decode::io::page_size() as usize;
    for i in (0..len).step_by(page) {
        // A write maps the page (a fresh zeroed allocation maps none).
        // SAFETY: `i < len`, inside `v`.
        unsafe { std::ptr::write_volatile(v.as_mut_ptr().add(i), 0) };
    }
    v
}

/// Run `f` with this thread's reply buffer: on its first use, one that
/// [`prepare`] made if there is one left.
pub fn with<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    READBUF.with(|b| {
        let mut b = b.borrow_mut();
        if b.capacity() == 0 {
            if let Some(v) = READY.lock().ok().and_then(|mut r| r.pop()) {
                *b = v;
            }
        }
        f(&mut b)
    })
}
