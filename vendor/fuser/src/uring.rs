//! PATCHED: FUSE over io_uring (Linux 6.14 and later, when the `fuse`
//! module's `enable_uring` parameter is set).
//!
//! The kernel keeps one request queue per possible CPU and puts a request on
//! the queue of the CPU its caller runs on; each queue here has threads of
//! its own. A request wakes its thread through io_uring's task work, where
//! `/dev/fuse` wakes whichever thread waits longest.
//!
//! Each thread owns one ring entry: a header buffer and a payload buffer
//! registered with the kernel, and an io_uring of its own. The kernel writes
//! a request into the buffers and completes the thread's last command; the
//! reply is written into the same buffers and committed with the command
//! that also fetches the next request. Interrupts, forgets and notifications
//! still go through `/dev/fuse`, so one reader of it stays.
//!
//! A reply can come from another thread (an interrupted request answered
//! `EINTR` while its thread still waits): it commits through the entry's
//! ring itself. That commit also fetches the entry's next request, which
//! the waiting thread cannot serve, so a new thread takes the entry over
//! and the old one ends when its request returns. The buffers are
//! registered for the life of the connection, so an entry is never freed.

use std::cell::UnsafeCell;
use std::io;
use std::io::IoSlice;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::thread::ThreadId;

use io_uring::IoUring;
use io_uring::cqueue;
use io_uring::opcode;
use io_uring::squeue;
use io_uring::types;
use log::error;
use log::warn;

use crate::Filesystem;
use crate::channel::ChannelSender;
use crate::dev_fuse::DevFuse;
use crate::ll::Operation;
use crate::reply::ReplyEmpty;
use crate::request::RequestWithSender;
use crate::session::SessionEventLoop;

/// `fuse_uring_req_header`: the `fuse_in_header` or `fuse_out_header`, the
/// operation's fixed argument, then `fuse_uring_ent_in_out`.
const IN_OUT: usize = 0;
const OP_IN: usize = 128;
const OP_IN_MAX: usize = 128;
const ENT_COMMIT_ID: usize = 264;
const ENT_PAYLOAD_SZ: usize = 272;
const HEADER_LEN: usize = 288;
const IN_HEADER_LEN: usize = 40;
const OUT_HEADER_LEN: usize = 16;

const CMD_REGISTER: u32 = 1;
const CMD_COMMIT_AND_FETCH: u32 = 2;

thread_local! {
    /// Did this thread, serving an entry, answer the request it took?
    static REPLIED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Requests taken from a ring since the process started.
static TAKEN: AtomicU64 = AtomicU64::new(0);

/// How many requests were served through io_uring queues so far.
pub fn requests() -> u64 {
    TAKEN.load(Ordering::Relaxed)
}

/// The kernel's queue count: one per possible CPU (`num_possible_cpus`;
/// `task_cpu` indexes them), counted from a list such as `0-3,8-11`.
pub(crate) fn possible_cpus() -> io::Result<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let mut n = 0usize;
    for part in s.trim().split(',') {
        let mut ends = part.splitn(2, '-').map(|v| v.parse::<usize>());
        let (a, b) = match (ends.next(), ends.next()) {
            (Some(Ok(a)), None) => (a, a),
            (Some(Ok(a)), Some(Ok(b))) if b >= a => (a, b),
            _ => return Err(io::Error::other(format!("CPU list not understood: {s}"))),
        };
        n += b - a + 1;
    }
    if n == 0 {
        return Err(io::Error::other("no CPU in /sys/devices/system/cpu/possible"));
    }
    Ok(n)
}

/// Can this process make the rings (io_uring allowed, 128-byte entries)?
pub(crate) fn probe() -> bool {
    match ring() {
        Ok(_) => true,
        Err(e) => {
            warn!("FUSE over io_uring not used: {e}");
            false
        }
    }
}

fn ring() -> io::Result<IoUring<squeue::Entry128, cqueue::Entry>> {
    // Two slots: the owner's commit and one from an interrupting thread.
    IoUring::<squeue::Entry128, cqueue::Entry>::builder().build(4)
}

/// One registered ring entry and the thread that serves it.
pub(crate) struct Entry {
    uring: IoUring<squeue::Entry128, cqueue::Entry>,
    /// Serializes writers of the submission queue.
    push: Mutex<()>,
    dev: Arc<DevFuse>,
    qid: u16,
    header: UnsafeCell<[u64; HEADER_LEN / 8]>,
    payload: UnsafeCell<Box<[u8]>>,
    iov: UnsafeCell<[libc::iovec; 2]>,
    /// The thread serving the entry.
    owner: Mutex<Option<ThreadId>>,
    registered: AtomicBool,
    /// Starts a thread that takes the entry over from a busy owner.
    takeover: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

// SAFETY: the buffers are written by one party at a time, as the protocol
// hands them over: the kernel until a command completes, then the owner
// thread until it has copied the request out, then whoever replies.
unsafe impl Sync for Entry {}
// SAFETY: as above.
unsafe impl Send for Entry {}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "uring::Entry(queue {})", self.qid)
    }
}

impl Entry {
    /// A ring entry of queue `qid` with a payload buffer of `payload`
    /// bytes (at least the kernel's largest request or reply), kept for the
    /// life of the process.
    pub(crate) fn new(dev: Arc<DevFuse>, qid: u16, payload: usize) -> io::Result<&'static Entry> {
        // (Its pages are mapped as replies first reach them: of the many
        // entries, most only ever answer small requests.)
        let buf = vec![0u8; payload].into_boxed_slice();
        let e = Box::leak(Box::new(Entry {
            uring: ring()?,
            push: Mutex::new(()),
            dev,
            qid,
            header: UnsafeCell::new([0; HEADER_LEN / 8]),
            payload: UnsafeCell::new(buf),
            iov: UnsafeCell::new([libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; 2]),
            owner: Mutex::new(None),
            registered: AtomicBool::new(false),
            takeover: Mutex::new(None),
        }));
        // SAFETY: nothing else holds the entry yet.
        unsafe {
            *e.iov.get() = [
                libc::iovec {
                    iov_base: e.header.get().cast(),
                    iov_len: HEADER_LEN,
                },
                libc::iovec {
                    iov_base: (*e.payload.get()).as_mut_ptr().cast(),
                    iov_len: payload,
                },
            ];
        }
        Ok(e)
    }

    fn header_ptr(&self) -> *mut u8 {
        self.header.get().cast()
    }

    fn payload_mut(&self) -> &mut [u8] {
        // SAFETY: see `Sync`: the caller is the party holding the buffers.
        unsafe { &mut **self.payload.get() }
    }

    /// Queue command `op` (with `commit_id`); submitted now unless the
    /// owner thread queues it, whose next wait submits it.
    fn command(&self, op: u32, commit_id: u64) -> io::Result<()> {
        // A REGISTER names the buffers (`iov`); a commit reuses them.
        let with_iov = op == CMD_REGISTER;
        let mut cmd = [0u8; 80];
        cmd[8..16].copy_from_slice(&commit_id.to_ne_bytes());
        cmd[16..18].copy_from_slice(&self.qid.to_ne_bytes());
        let mut b = opcode::UringCmd80::new(types::Fd(std::os::fd::AsRawFd::as_raw_fd(&*self.dev)), op)
            .cmd(cmd);
        if with_iov {
            b = b.addr(Some(self.iov.get() as u64));
        }
        let mut sqe = b.build();
        if with_iov {
            sqe = with_len(sqe, 2);
        }
        let _g = self.push.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: `push` serializes every writer of the submission queue;
        // the buffers named by `iov` live as long as the process.
        unsafe {
            let mut sq = self.uring.submission_shared();
            sq.push(&sqe).map_err(|_| io::Error::other("io_uring submission queue full"))?;
            sq.sync();
        }
        let me = std::thread::current().id();
        let mut owner = self.owner.lock().unwrap_or_else(|p| p.into_inner());
        if *owner == Some(me) {
            REPLIED.set(true);
            return Ok(());
        }
        self.uring.submit()?;
        if op == CMD_COMMIT_AND_FETCH {
            // The owner still works on the request answered here; the
            // entry's next request needs another thread.
            *owner = None;
            drop(owner);
            drop(_g);
            if let Some(start) = &*self.takeover.lock().unwrap_or_else(|p| p.into_inner()) {
                start();
            }
        }
        Ok(())
    }

    /// Write the reply `bufs` (a `fuse_out_header` and its arguments) into
    /// the buffers and commit it.
    pub(crate) fn reply(&self, commit_id: u64, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let payload = self.payload_mut();
        let mut out_header = [0u8; OUT_HEADER_LEN];
        let mut at = 0usize;
        let fits = total >= OUT_HEADER_LEN && total - OUT_HEADER_LEN <= payload.len();
        if fits {
            for b in bufs {
                let mut s: &[u8] = b;
                if at < OUT_HEADER_LEN {
                    let n = s.len().min(OUT_HEADER_LEN - at);
                    out_header[at..at + n].copy_from_slice(&s[..n]);
                    at += n;
                    s = &s[n..];
                }
                let p = at - OUT_HEADER_LEN;
                payload[p..p + s.len()].copy_from_slice(s);
                at += s.len();
            }
        } else {
            error!("FUSE reply of {total} bytes does not fit the ring's buffer");
            let unique = bufs
                .first()
                .and_then(|b| b.get(8..16))
                .and_then(|u| u.try_into().ok())
                .map_or(commit_id, u64::from_ne_bytes);
            out_header = eio_header(unique);
            at = OUT_HEADER_LEN;
        }
        let payload_sz = (at - OUT_HEADER_LEN) as u32;
        // SAFETY: the header buffer is ours until the commit.
        unsafe {
            let h = self.header_ptr();
            std::ptr::copy_nonoverlapping(out_header.as_ptr(), h.add(IN_OUT), OUT_HEADER_LEN);
            std::ptr::copy_nonoverlapping(
                payload_sz.to_ne_bytes().as_ptr(),
                h.add(ENT_PAYLOAD_SZ),
                4,
            );
        }
        self.command(CMD_COMMIT_AND_FETCH, commit_id)
    }

    /// Copy the request the kernel wrote into `req` (header, fixed
    /// argument, payload, as `/dev/fuse` gives it); its commit id.
    fn take(&self, req: &mut Vec<u8>) -> Result<u64, u64> {
        let mut h = [0u8; HEADER_LEN];
        // SAFETY: the kernel completed our command: the buffers are ours.
        unsafe { std::ptr::copy_nonoverlapping(self.header_ptr(), h.as_mut_ptr(), HEADER_LEN) };
        let u64_at = |i: usize| u64::from_ne_bytes(h[i..i + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |i: usize| u32::from_ne_bytes(h[i..i + 4].try_into().unwrap_or([0; 4]));
        let commit_id = u64_at(ENT_COMMIT_ID);
        let len = u32_at(IN_OUT) as usize;
        let payload_sz = u32_at(ENT_PAYLOAD_SZ) as usize;
        let payload = self.payload_mut();
        let op_len = len
            .checked_sub(IN_HEADER_LEN + payload_sz)
            .filter(|n| *n <= OP_IN_MAX && payload_sz <= payload.len())
            .ok_or(commit_id)?;
        req.clear();
        req.extend_from_slice(&h[IN_OUT..IN_OUT + IN_HEADER_LEN]);
        req.extend_from_slice(&h[OP_IN..OP_IN + op_len]);
        req.extend_from_slice(&payload[..payload_sz]);
        Ok(commit_id)
    }
}

/// Set an SQE's `len` (the iovec count of a REGISTER), which the builder
/// has no field for.
fn with_len(sqe: squeue::Entry128, len: u32) -> squeue::Entry128 {
    // SAFETY: `Entry128` is `repr(C)`: the 64-byte `io_uring_sqe`, whose
    // `len` is the u32 at offset 24, then 64 bytes of command.
    unsafe {
        let mut raw: [u8; 128] = std::mem::transmute(sqe);
        raw[24..28].copy_from_slice(&len.to_ne_bytes());
        std::mem::transmute(raw)
    }
}

/// Serve `entry`'s queue on this thread until the connection ends.
pub(crate) fn serve<FS: Filesystem>(
    entry: &'static Entry,
    el: &SessionEventLoop<FS>,
) -> io::Result<()> {
    let me = std::thread::current().id();
    *entry.owner.lock().unwrap_or_else(|p| p.into_inner()) = Some(me);
    if !entry.registered.swap(true, Ordering::AcqRel) {
        entry.command(CMD_REGISTER, 0)?;
    }
    let mut req = Vec::with_capacity(8192);
    loop {
        match entry.uring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        }
        // SAFETY: only this thread reads the completion queue.
        let cqe = unsafe { entry.uring.completion_shared() }.next();
        let Some(cqe) = cqe else { continue };
        let res = cqe.result();
        if res < 0 {
            return match -res {
                libc::ENOTCONN | libc::ENODEV | libc::ECANCELED | libc::ECONNABORTED => Ok(()),
                e => Err(io::Error::from_raw_os_error(e)),
            };
        }
        TAKEN.fetch_add(1, Ordering::Relaxed);
        let sender = |id| ChannelSender::ring(entry.dev.clone(), entry, id);
        let commit_id = match entry.take(&mut req) {
            Ok(id) => id,
            Err(id) => {
                error!("malformed FUSE request from the ring");
                reply_eio(entry, id);
                continue;
            }
        };
        REPLIED.set(false);
        match RequestWithSender::new(sender(commit_id), &req) {
            Some(r) => {
                if let Ok(Operation::Destroy(_)) = r.request.operation() {
                    r.reply::<ReplyEmpty>().ok();
                    entry.uring.submit()?;
                    return Ok(());
                }
                r.dispatch(el);
            }
            None => reply_eio(entry, commit_id),
        }
        // Answered by another thread, which gave the entry to a new one (or
        // is about to): this thread must not wait on the ring any more.
        if !REPLIED.get() || *entry.owner.lock().unwrap_or_else(|p| p.into_inner()) != Some(me) {
            return Ok(());
        }
    }
}

/// Have `start` called when the entry's owner is busy with a request
/// another thread answered: it must start a thread running [`serve`].
/// `None` once the session ends (what `start` holds is let go).
pub(crate) fn on_takeover(entry: &Entry, start: Option<Box<dyn Fn() + Send + Sync>>) {
    *entry.takeover.lock().unwrap_or_else(|p| p.into_inner()) = start;
}

fn reply_eio(entry: &Entry, commit_id: u64) {
    let h = eio_header(commit_id);
    if let Err(e) = entry.reply(commit_id, &[IoSlice::new(&h)]) {
        error!("FUSE ring reply failed: {e}");
    }
}

/// A `fuse_out_header` answering request `unique` with `EIO`.
fn eio_header(unique: u64) -> [u8; OUT_HEADER_LEN] {
    let mut h = [0u8; OUT_HEADER_LEN];
    h[0..4].copy_from_slice(&(OUT_HEADER_LEN as u32).to_ne_bytes());
    h[4..8].copy_from_slice(&(-libc::EIO).to_ne_bytes());
    h[8..16].copy_from_slice(&unique.to_ne_bytes());
    h
}
