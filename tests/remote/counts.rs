//! The cost model, counted in requests (loopback cannot model latency):
//! the fault server counts the GETs it answers, and `--stats` prints the
//! client's own count (`gets=N`), which must agree with it. The frame is
//! `big` of gen_remote_data.py: 8 chunks of 2 MiB, blocks of 256 KiB
//! compressing to about 100 KiB.

use crate::common::*;
use crate::harness::*;
use crate::servers::*;
use std::os::unix::fs::FileExt;
use std::time::Duration;

const CHUNK: u64 = 2 << 20;
const BLOCK: u64 = 256 << 10;
const NCHUNKS: u64 = 8;
/// GETs a scan of the frame may cost, by `cat` (which decodes 4 MiB
/// windows on all CPUs: interleaved scans) or through a mount: about one a
/// chunk (measured 6-9). One GET per block would be 64.
const SCAN: u64 = NCHUNKS + 3;

/// `big`/`big2` frames in a directory served by the fault server.
pub struct Big {
    pub dir: tempfile::TempDir,
    pub srv: Faulty,
    pub r: Remote,
}

impl Big {
    pub fn start() -> Option<Big> {
        let dir = tempfile::tempdir().unwrap();
        big_frames(dir.path())?;
        write_manifest(dir.path());
        let srv = Faulty::start(dir.path())?;
        let r = Remote::http(&srv);
        Some(Big { dir, srv, r })
    }

    /// The uncompressed bytes of `big` (or `big2`).
    pub fn raw(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.dir.path().join(format!("{name}.raw"))).unwrap()
    }

    /// The server's GET count once it has stayed the same for 300 ms (GETs
    /// started in the background are counted with what started them).
    pub fn settled_gets(&self) -> u64 {
        settled(&|| self.srv.gets())
    }
}

/// `count()` once it has stayed the same for 300 ms (GETs started in the
/// background are counted with what started them).
pub fn settled(count: &dyn Fn() -> u64) -> u64 {
    let mut last = count();
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = count();
        if now == last {
            return now;
        }
        last = now;
    }
}

#[test]
fn opening_a_frame_costs_at_most_two_gets_and_no_head() {
    let Some(b) = Big::start() else { return };
    let o = b.r.info("big.b2frame", &["--stats"]);
    assert!(o.status.success(), "{}", o.stderr);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("nchunks:       8"), "{text}");
    let s = b.srv.stats();
    assert!(s["gets"].as_u64().unwrap() <= 2, "open: {s}");
    assert_eq!(s["heads"], 0, "{s}");
    assert_eq!(
        o.gets(),
        s["gets"].as_u64().unwrap(),
        "--stats disagrees with the server"
    );
}

#[test]
fn a_sequential_scan_costs_about_one_get_per_chunk() {
    let Some(b) = Big::start() else { return };
    let raw = b.raw("big");
    let o = b.r.cat("big.b2frame", None, &["--stats"]);
    assert!(o.status.success(), "{}", o.stderr);
    assert!(o.stdout == raw, "cat: {}", first_diff(&raw, &o.stdout));
    let gets = b.settled_gets();
    assert!(gets <= SCAN, "cat of {NCHUNKS} chunks: {gets} GETs");
    assert_eq!(o.gets(), gets, "--stats disagrees with the server");
    if !fuse_available() {
        return;
    }
    let mut m = b.r.mount(&[MANIFEST, "xattr"]);
    let _ = std::fs::metadata(m.path("big")).unwrap();
    b.settled_gets();
    b.srv.reset();
    let before = mount_gets(&m);
    let got = std::fs::read(m.path("big")).unwrap();
    assert!(got == raw, "through the mount: {}", first_diff(&raw, &got));
    let gets = b.settled_gets();
    assert!(
        gets <= SCAN,
        "a read of {NCHUNKS} chunks through the mount: {gets} GETs"
    );
    assert_eq!(
        mount_gets(&m) - before,
        gets,
        "user.bloscfs.stats disagrees with the server"
    );
    m.unmount();
}

/// Through a mount: the first random 4 KiB read of a frame costs at most 2
/// GETs (its chunk's header, then its block), and they are the first sent:
/// the other chunks' headers are fetched only once it is answered, in fewer
/// GETs than chunks. Every later read of blocks not read yet costs at most 1,
/// also one straddling two blocks.
#[test]
fn random_reads_cost_one_get_once_chunk_heads_are_known() {
    if !fuse_available() {
        return;
    }
    let Some(b) = Big::start() else { return };
    let raw = b.raw("big");
    let starts = chunk_starts(&b.dir.path().join("big.b2frame"));
    let mut m = b.r.mount(&[MANIFEST]);
    let _ = std::fs::metadata(m.path("big")).unwrap();
    b.srv.reset();
    let f = std::fs::File::open(m.path("big")).unwrap();
    let opened = b.settled_gets();
    assert!(opened <= 2, "open: {opened} GETs: {}", b.srv.stats());
    let at = |c: u64, k: u64| c * CHUNK + k * BLOCK + 4096;
    let mut buf = vec![0u8; 4096];
    let read = |off: u64, buf: &mut Vec<u8>| {
        f.read_exact_at(buf, off).unwrap();
        assert!(
            buf[..] == raw[off as usize..off as usize + 4096],
            "at {off}"
        );
    };
    read(at(3, 2), &mut buf);
    let first = b.settled_gets() - opened;
    let gets = fetched_ranges(&b.srv.stats())[opened as usize..].to_vec();
    assert_eq!(gets.len() as u64, first);
    // The read's own GETs: those before the first that holds another
    // chunk's start (a header hint).
    let own = gets
        .iter()
        .take_while(|r| {
            starts
                .iter()
                .enumerate()
                .all(|(c, s)| c == 3 || !r.contains(s))
        })
        .count();
    let block = block_start(&b.dir.path().join("big.b2frame"), starts[3], 2);
    assert!(
        own <= 2 && gets[0].contains(&starts[3]) && gets[..own].iter().any(|r| r.contains(&block)),
        "first random read: {gets:?} (chunks start at {starts:?}, the block at {block})"
    );
    assert!(first - (own as u64) < NCHUNKS, "header hints: {gets:?}");
    // (c, k): block k of chunk c; a negative offset straddles blocks k - 1
    // and k, both fetched in one GET.
    for (c, k, shift) in [
        (5, 6, 0),
        (1, 3, 0),
        (7, 0, 0),
        (2, 4, -6144),
        (0, 5, 0),
        (6, 7, 0),
    ] {
        let before = b.settled_gets();
        read(at(c, k).checked_add_signed(shift).unwrap(), &mut buf);
        let cost = b.settled_gets() - before;
        assert!(
            cost <= 1,
            "random read of chunk {c} block {k}: {cost} GETs: {}",
            b.srv.stats()["ranges"]
        );
    }
    drop(f);
    m.unmount();
}

/// Where each chunk of the frame at `path` starts in it.
fn chunk_starts(path: &std::path::Path) -> Vec<u64> {
    let c = blosc_decode::open_path(path).unwrap().unwrap();
    c.chunks()
        .iter()
        .map(|e| match e.loc {
            blosc_decode::index::ChunkLoc::Stored { offset, .. } => offset,
            _ => panic!("a chunk of {} is not stored", path.display()),
        })
        .collect()
}

/// Where block `k` of the chunk at `chunk` of the file at `path` starts in
/// the file (its entry in the chunk's block starts, after the 32-byte
/// header).
fn block_start(path: &std::path::Path, chunk: u64, k: u64) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let at = (chunk + 32 + 4 * k) as usize;
    chunk + u64::from(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()))
}

/// The byte ranges of the GETs in the fault server's `stats`, in the order
/// they arrived.
fn fetched_ranges(stats: &serde_json::Value) -> Vec<std::ops::Range<u64>> {
    let ranges = stats["ranges"].as_array().unwrap();
    ranges
        .iter()
        .map(|r| {
            let h = r[1].as_str().expect("a GET without a Range");
            let (a, b) = h.strip_prefix("bytes=").unwrap().split_once('-').unwrap();
            a.parse().unwrap()..b.parse::<u64>().unwrap() + 1
        })
        .collect()
}

/// `remote_gets` of the mount's `user.bloscfs.stats` (mounted with
/// `-o xattr`), once it has stayed the same for 300 ms.
pub fn mount_gets(m: &RemoteMount) -> u64 {
    let read = || -> u64 {
        let o = std::process::Command::new("getfattr")
            .args(["--only-values", "-n", "user.bloscfs.stats"])
            .arg(m.mp())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("remote_gets=")?.parse().ok())
            .expect("no remote_gets in user.bloscfs.stats")
    };
    settled(&read)
}

/// `big` on moto and on Caterva2 (what of them is installed), with its
/// uncompressed bytes; the servers live as long as the first item.
fn big_on_s3_and_caterva2() -> (Vec<Box<dyn std::any::Any>>, Vec<Remote>, Vec<u8>) {
    let d = tempfile::tempdir().unwrap();
    if big_frames(d.path()).is_none() {
        return (vec![], vec![], vec![]);
    }
    let raw = std::fs::read(d.path().join("big.raw")).unwrap();
    let top = tempfile::tempdir().unwrap();
    copy(
        &d.path().join("big.b2frame"),
        &top.path().join("big.b2frame"),
    );
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    let mut remotes = Vec::new();
    if let Some(m) = Moto::start() {
        m.mkbucket("counts");
        m.upload("counts", "p", top.path());
        remotes.push(Remote::s3(&m, "counts", "p"));
        keep.push(Box::new(m));
    }
    if let Some(c) = Caterva2::start(top.path()) {
        remotes.push(Remote::caterva2(&c));
        keep.push(Box::new(c));
    }
    keep.push(Box::new((d, top)));
    (keep, remotes, raw)
}

/// The same counts over S3 (moto has no counter: the client's `--stats`)
/// and Caterva2's fetch API.
#[test]
fn s3_and_caterva2_open_and_scan_in_as_few_gets() {
    let (_keep, remotes, raw) = big_on_s3_and_caterva2();
    for r in &remotes {
        let o = r.info("big.b2frame", &["--stats"]);
        assert!(o.status.success(), "{}: {}", r.base, o.stderr);
        assert!(o.gets() <= 2, "{}: open: {} GETs", r.base, o.gets());
        let o = r.cat("big.b2frame", None, &["--stats"]);
        assert!(o.status.success(), "{}: {}", r.base, o.stderr);
        assert!(
            o.stdout == raw,
            "{}: {}",
            r.base,
            first_diff(&raw, &o.stdout)
        );
        assert!(o.gets() <= SCAN, "{}: cat: {} GETs", r.base, o.gets());
    }
}

/// A mount's scan (one reader) of S3 and Caterva2, counted by the daemon
/// (`user.bloscfs.stats`): about one GET a chunk.
#[test]
fn a_mount_scans_s3_and_caterva2_in_about_one_get_per_chunk() {
    if !fuse_available() {
        return;
    }
    let (_keep, remotes, raw) = big_on_s3_and_caterva2();
    for r in &remotes {
        let mut m = r.mount(&["xattr"]);
        let _ = std::fs::metadata(m.path("big")).unwrap();
        let before = mount_gets(&m);
        let got = std::fs::read(m.path("big")).unwrap();
        assert!(got == raw, "{}: {}", r.base, first_diff(&raw, &got));
        let gets = mount_gets(&m) - before;
        assert!(gets <= SCAN, "{}: a mount's scan: {gets} GETs", r.base);
        m.unmount();
    }
}
