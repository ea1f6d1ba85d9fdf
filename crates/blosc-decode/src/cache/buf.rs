//! [`BlockBuf`]: a block's buffer, its own anonymous mapping when large,
//! so that memory in use is exactly what the cache holds.

use std::sync::atomic::Ordering;

/// Buffers this large or larger get their own anonymous mapping.
const MAP_MIN: usize = 128 << 10;
/// At most this many such mappings at once (each may be a kernel VMA, and a
/// process has 65,530 by default); beyond, buffers go on the heap.
const MAX_MAPPINGS: usize = 16 << 10;
static MAPPINGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// The page size the mappings are rounded to.
pub(super) const PAGE: usize = 4096;

/// A block's buffer. From 128 KiB up it is its own anonymous mapping, whose
/// pages go back to the system the moment it is dropped: memory in use is
/// then exactly what the cache and its spares hold. (On the heap, blocks of
/// mixed sizes freed in any order left the daemon 50 MiB over a 64 MiB
/// budget.) Smaller blocks, and any the system will not map, live on the
/// heap. The bytes are always initialized (fresh mappings are zeroed).
pub struct BlockBuf {
    len: usize,
    pub(super) mem: Mem,
}

pub(super) enum Mem {
    Heap(Vec<u8>),
    Map(std::ptr::NonNull<u8>, usize),
}

// SAFETY: a BlockBuf owns its memory exclusively, like a Vec<u8>.
unsafe impl Send for BlockBuf {}
// SAFETY: shared access is read-only (`&[u8]`).
unsafe impl Sync for BlockBuf {}

impl BlockBuf {
    /// `len` zero bytes (their pages are mapped lazily: see `populate`).
    pub fn new(len: usize) -> BlockBuf {
        let cap = len.next_multiple_of(PAGE);
        let mem = match (len >= MAP_MIN).then(|| map_anon(cap)).flatten() {
            Some(p) => Mem::Map(p, cap),
            None => Mem::Heap(vec![0u8; len]),
        };
        BlockBuf { len, mem }
    }

    /// Bytes of memory held (what the cache counts against its budget).
    pub fn footprint(&self) -> usize {
        match &self.mem {
            Mem::Heap(v) => v.capacity(),
            Mem::Map(_, cap) => *cap,
        }
    }

    /// The most `set_len` accepts.
    pub fn capacity(&self) -> usize {
        match &self.mem {
            Mem::Heap(v) => v.len(),
            Mem::Map(_, cap) => *cap,
        }
    }

    /// Use the first `len` bytes (at most `capacity`; old contents stay).
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity(), "BlockBuf::set_len beyond capacity");
        self.len = len;
    }

    /// Map every page now, off the read path, so that decoding into the
    /// buffer later pays no page fault per 4 KiB.
    pub fn populate(&mut self) {
        // Linux 5.14; older kernels refuse it and the pages are touched.
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        if let Mem::Map(p, cap) = &self.mem {
            // SAFETY: advice on our own mapping.
            if unsafe { libc::madvise(p.as_ptr().cast(), *cap, MADV_POPULATE_WRITE) } == 0 {
                return;
            }
        }
        // Writing the byte already there changes nothing but maps the page.
        for i in (0..self.len).step_by(PAGE) {
            let b = std::hint::black_box(self[i]);
            self[i] = b;
        }
    }
}

/// A fresh private anonymous mapping of `cap` bytes, counted in
/// `MAPPINGS`; `None` past `MAX_MAPPINGS` or when the system refuses.
fn map_anon(cap: usize) -> Option<std::ptr::NonNull<u8>> {
    if MAPPINGS.fetch_add(1, Ordering::Relaxed) < MAX_MAPPINGS {
        // SAFETY: a fresh private anonymous mapping; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                cap,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            if let Some(p) = std::ptr::NonNull::new(p.cast::<u8>()) {
                return Some(p);
            }
        }
    }
    MAPPINGS.fetch_sub(1, Ordering::Relaxed);
    None
}

impl From<Vec<u8>> for BlockBuf {
    /// A heap buffer holding `v`.
    fn from(v: Vec<u8>) -> BlockBuf {
        BlockBuf {
            len: v.len(),
            mem: Mem::Heap(v),
        }
    }
}

impl std::ops::Deref for BlockBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.mem {
            Mem::Heap(v) => &v[..self.len],
            // SAFETY: `len <= cap` bytes of our mapping, initialized (zeroed
            // by the kernel, then only written through `&mut [u8]`).
            Mem::Map(p, _) => unsafe { std::slice::from_raw_parts(p.as_ptr(), self.len) },
        }
    }
}

impl std::ops::DerefMut for BlockBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.mem {
            Mem::Heap(v) => &mut v[..self.len],
            // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
            Mem::Map(p, _) => unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), self.len) },
        }
    }
}

impl Drop for BlockBuf {
    fn drop(&mut self) {
        if let Mem::Map(p, cap) = &self.mem {
            // SAFETY: our mapping, unmapped once.
            unsafe { libc::munmap(p.as_ptr().cast(), *cap) };
            MAPPINGS.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for BlockBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BlockBuf({} of {} bytes)", self.len, self.footprint())
    }
}
