//! A read's chunks past the first decoded on the runner of the `Env`, and
//! every chunk (every Blosc block) decoded once however many readers and
//! jobs want it: counted on arrays zarr-python 3.1 wrote
//! (scripts/fixtures/gen_zarr.py).

#[path = "../../../tests/common/npy.rs"]
mod npy;

use blosc_decode::ahead::{Job, JobKind, Runner};
use blosc_decode::container::Env;
use blosc_decode::io::{First, Source};
use bloscfs_zarr::{ChunkStore, DirStore, ZarrArray};
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn store(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/zarr/z3-3.1.6/stores")
        .join(rel)
}

fn expected(rel: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/zarr/z3-3.1.6/expected")
        .join(format!("{rel}.npy"));
    npy::as_bloscfs_shows(&std::fs::read(p).unwrap())
}

/// All of `a`'s `.npy` in one read, checked against zarr-python's.
fn read_all(a: &ZarrArray, want: &[u8]) {
    let mut buf = vec![0u8; want.len()];
    assert_eq!(a.read_npy_at(0, &mut buf).unwrap(), want.len());
    assert!(buf == want, "other bytes than zarr-python's");
}

/// A runner that keeps the decode jobs it is given until the test runs
/// them (the reader meanwhile finds them all still queued).
#[derive(Default)]
struct Held(Mutex<Vec<Job>>);

impl Runner for Held {
    fn workers(&self) -> usize {
        2
    }
    fn run(&self, kind: JobKind, job: Job) -> bool {
        kind == JobKind::Decode && {
            self.0.lock().push(job);
            true
        }
    }
}

impl Held {
    fn run_all(&self) -> usize {
        let jobs = std::mem::take(&mut *self.0.lock());
        let n = jobs.len();
        jobs.into_iter().for_each(|j| j());
        n
    }
}

/// A runner that runs each decode job as it is handed over (before the
/// reader comes to its chunk), counting them.
#[derive(Default)]
struct Inline(Mutex<usize>);

impl Runner for Inline {
    fn workers(&self) -> usize {
        2
    }
    fn run(&self, kind: JobKind, job: Job) -> bool {
        if kind != JobKind::Decode {
            return false;
        }
        *self.0.lock() += 1;
        job();
        true
    }
}

fn open(rel: &str, env: &Env) -> ZarrArray {
    ZarrArray::open_with(Arc::new(DirStore::new(&store(rel))), env.clone()).unwrap()
}

/// `zstd.zarr` (9x8 int64 in 4x4 chunks: a grid of 3x2, 3 chunks
/// written): one read of it all hands the 5 chunks after the first to the
/// runner; whether the reader comes to them first (claiming them) or the
/// jobs do, each written chunk is decoded once.
#[test]
fn a_read_hands_its_other_chunks_to_the_runner_each_decoded_once() {
    let want = expected("zstd.zarr");
    let held = Arc::new(Held::default());
    let a = open("zstd.zarr", &Env::with_runner(64 << 20, held.clone()));
    read_all(&a, &want);
    assert_eq!(a.decodes(), 3);
    assert_eq!(held.run_all(), 5, "jobs handed to the runner");
    assert_eq!(a.decodes(), 3, "jobs of chunks the reader claimed");

    let inline = Arc::new(Inline::default());
    let env = Env::with_runner(64 << 20, inline.clone());
    let a = open("zstd.zarr", &env);
    read_all(&a, &want);
    assert_eq!((*inline.0.lock(), a.decodes()), (5, 3));
    read_all(&a, &want);
    assert_eq!(a.decodes(), 3, "all cached");
}

/// `blocks.zarr` (260x256 int32 in chunks of 128 rows, 32 Blosc blocks of
/// 4 KiB each; 2 chunks written): the blocks of the second chunk a read
/// touches are decoded by a job, each of the 64 blocks once, whoever
/// comes first.
#[test]
fn the_blocks_of_a_reads_other_chunks_are_decoded_on_the_runner_once() {
    let want = expected("blocks.zarr");
    let held = Arc::new(Held::default());
    let env = Env::with_runner(64 << 20, held.clone());
    let a = open("blocks.zarr", &env);
    assert!(a.by_block());
    read_all(&a, &want);
    let decoded = || env.stats.blocks_decoded.load(Ordering::Relaxed);
    assert_eq!(decoded(), 64);
    assert_eq!(held.run_all(), 2, "chunks 1 and 2 handed to the runner");
    assert_eq!(decoded(), 64, "the jobs found the blocks cached");

    let inline = Arc::new(Inline::default());
    let env = Env::with_runner(64 << 20, inline.clone());
    let a = open("blocks.zarr", &env);
    read_all(&a, &want);
    let decoded = env.stats.blocks_decoded.load(Ordering::Relaxed);
    assert_eq!((*inline.0.lock(), decoded), (2, 64));
}

/// A store whose first open of `key` waits until the test lets it go.
struct Gate {
    dir: DirStore,
    key: &'static str,
    /// Opens of `key` so far; whether the first may go on.
    state: Mutex<(usize, bool)>,
    cv: Condvar,
}

impl ChunkStore for Gate {
    fn open(&self, key: &str, first: First) -> bloscfs_zarr::Result<Option<Arc<dyn Source>>> {
        if key == self.key {
            let mut s = self.state.lock();
            s.0 += 1;
            self.cv.notify_all();
            while s.0 == 1 && !s.1 {
                self.cv.wait(&mut s);
            }
        }
        self.dir.open(key, first)
    }
}

/// Two readers of `key` of the store `rel` at once (the first held inside
/// the store's open until the second has started): the second reads
/// what zarr-python reads; returns the opens of `key` and the runner's
/// table while the first was held.
fn two_readers_at_once(rel: &str, key: &'static str, env: &Env) -> (usize, usize, Arc<ZarrArray>) {
    let want = expected(rel);
    let gate = Arc::new(Gate {
        dir: DirStore::new(&store(rel)),
        key,
        state: Mutex::new((0, false)),
        cv: Condvar::new(),
    });
    let a = Arc::new(ZarrArray::open_with(gate.clone(), env.clone()).unwrap());
    let h = a.npy_header().len();
    let reader = |a: Arc<ZarrArray>| {
        let want = want[h..h + 8].to_vec();
        std::thread::spawn(move || {
            let mut b = [0u8; 8];
            a.read_npy_at(h as u64, &mut b).unwrap();
            assert_eq!(b[..], want[..]);
        })
    };
    let first = reader(a.clone());
    let mut s = gate.state.lock();
    while s.0 == 0 {
        gate.cv.wait(&mut s);
    }
    drop(s);
    let in_flight = env.ahead.in_flight();
    let second = reader(a.clone());
    gate.state.lock().1 = true;
    gate.cv.notify_all();
    first.join().unwrap();
    second.join().unwrap();
    let opens = gate.state.lock().0;
    (opens, in_flight, a)
}

/// A Blosc chunk read by block is registered in the runner's table while
/// it is opened, so that a second reader (or a job decoding ahead) waits
/// for that open instead of fetching the chunk again: a reader that reads
/// on fetches a chunk whole, and two would fetch it twice.
#[test]
fn a_blosc_chunk_being_opened_is_waited_for_not_opened_again() {
    let env = Env::new(64 << 20);
    let (opens, in_flight, _) = two_readers_at_once("blocks.zarr", "c/0/0", &env);
    assert_eq!(in_flight, 1, "the chunk being opened is registered");
    assert_eq!(opens, 1, "c/0/0 opened once");
}

/// While one reader loads a chunk decoded whole, the chunk is registered
/// in the runner's table, so that a second reader of it waits for that
/// one decode instead of fetching and decoding the chunk again.
#[test]
fn a_chunk_being_loaded_is_waited_for_not_loaded_again() {
    let env = Env::new(64 << 20);
    let (opens, in_flight, a) = two_readers_at_once("zstd.zarr", "c/0/0", &env);
    assert_eq!(in_flight, 1, "the chunk being loaded is registered");
    assert_eq!(opens, 1, "c/0/0 opened once");
    assert_eq!(a.decodes(), 1);
}

/// A reader that reads on has the chunks of the next 4 MiB past each read
/// decoded on the runner (`blocks.zarr`, 260 KiB, is all of it: 64 Blosc
/// blocks written): once the jobs have run, reading the rest of the array
/// decodes nothing more.
#[test]
fn a_reader_that_reads_on_has_what_follows_decoded_on_the_runner() {
    let want = expected("blocks.zarr");
    let held = Arc::new(Held::default());
    let env = Env::with_runner(64 << 20, held.clone());
    let a = open("blocks.zarr", &env);
    let decoded = || env.stats.blocks_decoded.load(Ordering::Relaxed);
    let mut got = vec![0u8; want.len()];
    let step = 4 << 10;
    for at in (0..3 * step).step_by(step) {
        a.read_npy_at(at as u64, &mut got[at..at + step]).unwrap();
    }
    let by_reads = decoded();
    assert!(by_reads < 64, "the reads decoded {by_reads} blocks");
    assert!(held.run_all() > 0, "nothing handed to the runner");
    assert_eq!(
        decoded(),
        64,
        "the blocks past the reads, decoded by the jobs"
    );
    let rest = 3 * step;
    a.read_npy_at(rest as u64, &mut got[rest..]).unwrap();
    assert!(got == want, "other bytes than zarr-python's");
    assert_eq!(decoded(), 64, "blocks decoded again");
}

/// `decode_ahead=0` turns that off: the same reads hand nothing to the
/// runner (each read of `blocks.zarr` is inside one chunk).
#[test]
fn decode_ahead_0_decodes_nothing_past_a_reader_that_reads_on() {
    let want = expected("blocks.zarr");
    let held = Arc::new(Held::default());
    let mut env = Env::with_runner(64 << 20, held.clone());
    env.decode_ahead = blosc_decode::DecodeAhead::Fixed(0);
    let a = open("blocks.zarr", &env);
    let mut got = vec![0u8; want.len()];
    let step = 4 << 10;
    for at in (0..3 * step).step_by(step) {
        a.read_npy_at(at as u64, &mut got[at..at + step]).unwrap();
    }
    assert_eq!(held.run_all(), 0, "jobs handed to the runner");
    a.read_npy_at(0, &mut got).unwrap();
    assert!(got == want, "other bytes than zarr-python's");
}
