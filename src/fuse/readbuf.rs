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
    /// The buffer, and how many of its bytes were ever written (a read
    /// shortens it to what it answered; those bytes stay written).
    static READBUF: RefCell<(Vec<u8>, usize)> = const { RefCell::new((Vec::new(), 0)) };
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
/// [`prepare`] made if there is one left. It is handed over as long as it
/// ever was, so that a 1 MiB read after a 16 KiB one does not zero the
/// 1 MiB first (the read writes every byte it answers with).
pub fn with<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    READBUF.with(|cell| {
        let mut cell = cell.borrow_mut();
        let (b, written) = &mut *cell;
        if b.capacity() == 0 {
            if let Some(v) = READY.lock().ok().and_then(|mut r| r.pop()) {
                *written = v.len();
                *b = v;
            }
        }
        if b.len() < *written && *written <= b.capacity() {
            // SAFETY: `written <= capacity`, and bytes `..written` were all
            // written once (made zeroed, or filled by a read); shortening a
            // `Vec<u8>` leaves them as they are.
            unsafe { b.set_len(*written) };
        }
        let (at, before) = (b.as_ptr(), std::mem::take(written));
        // (Should `f` panic, nothing is known written any more.)
        let r = f(b);
        // Moved (grown, or replaced): only its length is known written.
        *written = if b.as_ptr() == at {
            before.max(b.len())
        } else {
            b.len()
        };
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1 MiB read after a short one gets the buffer whole, its bytes as
    /// they were: nothing is zeroed again (1 MiB written twice per request).
    #[test]
    fn a_large_read_after_a_short_one_is_not_zeroed_first() {
        std::thread::spawn(|| {
            READBUF.with(|c| *c.borrow_mut() = (mapped(REQUEST_MAX), REQUEST_MAX));
            with(|b| {
                assert_eq!(b.len(), REQUEST_MAX);
                b[REQUEST_MAX - 1] = 7;
                b.truncate(16 << 10);
            });
            with(|b| {
                assert_eq!(b.len(), REQUEST_MAX);
                assert_eq!(b[REQUEST_MAX - 1], 7);
            });
            // Grown past it: the new length is what is known written.
            with(|b| b.resize(2 * REQUEST_MAX, 1));
            with(|b| {
                assert_eq!(b.len(), 2 * REQUEST_MAX);
                b.truncate(0);
            });
            with(|b| assert_eq!(b.len(), 2 * REQUEST_MAX));
        })
        .join()
        .unwrap();
    }
}
