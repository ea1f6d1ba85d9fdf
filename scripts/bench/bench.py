#!/usr/bin/env python3
"""bloscfs benchmark: every contender side by side in one run, as ratios.

    .venv/bin/python scripts/bench/bench.py [--size 512M] [--runs 3] [--quick] [--doc docs/PERFORMANCE.md]
    .venv/bin/python scripts/bench/bench.py --table docs/bench/runs/DATE.json [--doc docs/PERFORMANCE.md]

--doc FILE replaces the table between FILE's two `<!-- bench.py ... -->` marker lines
and saves the run's raw results as JSON in docs/bench/runs/ beside FILE (or --save DIR).
--table RUN.json measures nothing: it prints a saved run's table, or writes it with --doc.

Makes its own data with python-blosc2 (in $BENCH_DIR, default /tmp/bloscfs-bench),
then measures, each as the median of --runs:
  - decode-only throughput: `bloscfs cat` vs python-blosc2 decompress_chunk (2 threads), per codec/filter
  - cold sequential 1 MiB reads through a fresh mount vs C-Blosc2 in-process vs the raw
    bytes from the page cache (the floor) vs an empty FUSE fs answering from memory (FUSE floor)
  - cold random 4 KiB pread p50/p99 vs python-blosc2 get_slice at the same offsets,
    unpinned and pinned (taskset, both on CPU 0), and unpinned with -o source_io=buffered and
    with -o uring (the kernel's FUSE io_uring queues, if /sys/module/fuse/parameters/enable_uring
    is Y; the sequential rows measure -o uring too)
  - warm re-read (kernel page cache kept) vs the FUSE floor re-reading with keep_cache
  - a 2-D b2nd array: one row and a full scan through the mount vs python-blosc2 slicing
  - one 2-D array stored with narrow, square and row blocks: `.npy` sequential read vs arr[...]
    (time, blocks decoded, source bytes read, daemon VmHWM); alone with --npy-blocks
  - daemon peak RSS (VmHWM) after reading a 16 GiB mostly-zero frame with cache_size=64M, and
    after random reads over the five series (three block sizes); zero chunks vs the FUSE floor
  - mount + `ls -l` of a tree of 10,000 small containers
  - ratarmount (if it can be installed) on the same bytes as .tar.gz, sequential and random
  - remote sources (scripts/bench/remote.py; alone with --remote): mounts of S3 (moto), plain
    HTTP and Caterva2 servers on loopback vs download-and-decode, C2Array and raw ranged GETs;
    1 and 8 random readers and the first read of a fresh mount, also with 10 ms added to
    every round trip (scripts/bench/readers.py, through scripts/bench/delayproxy.py)
  - scaling (scripts/bench/scale.py; alone with --scale, skipped by --quick): for 1, 2, 4, ...
    CPUs up to the machine (taskset), 1 and k readers of a fresh mount, default options and
    -o decode_ahead=0, vs C-Blosc2 with k threads, the FUSE floor and `bloscfs cat` on those CPUs
Absolute times on a shared 2-core machine are noisy: read the ratios.
BLOSCFS_BIN=PATH measures another build of bloscfs (default target/release/bloscfs), to set
two builds' runs side by side.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import time

import blosc2
import numpy as np

import remote
import scale

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("BLOSCFS_BIN") or os.path.join(ROOT, "target/release/bloscfs")
FLOOR = os.path.join(ROOT, "target/release/fusefloor")
MB = 1 << 20
GB = 1 << 30


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, capture_output=True, text=True, **kw)


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass  # not root: "cold" then means a fresh mount only


def median_time(fn, runs):
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def is_mounted(mp):
    with open("/proc/self/mountinfo") as f:
        return any(l.split(" ")[4] == mp for l in f)


def uring_offered():
    """Whether `-o uring` gets the kernel's FUSE io_uring queues here, for the rows' text."""
    try:
        on = open("/sys/module/fuse/parameters/enable_uring").read().strip() == "Y"
    except OSError:
        on = False
    return "the kernel offers its io_uring queues" if on else "enable_uring off: through /dev/fuse"


def wait_mounted(mp, on=True):
    t = time.time()
    while is_mounted(mp) != on:
        if time.time() - t > 20:
            raise RuntimeError(f"mount state of {mp} did not become {on}")
        time.sleep(0.02)


def make_warm(src):
    """A small 3-D array in `src/warm/` that a fresh mount serves before it is measured."""
    d = os.path.join(src, "warm")
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "w.b2nd")
    if not os.path.exists(p):
        n = 16 * 256 * 256
        blosc2.asarray(np.linspace(0, 1, n, dtype="f4").reshape(16, 256, 256), urlpath=p, mode="w")


def warm(mp):
    """Have a fresh mount of a source holding `make_warm`'s array serve it, its header and a
    plane through mmap, before the page cache is dropped and the mount is measured: the
    daemon's code is then in memory, as the reference library's is in this process (mapped
    pages stay when the page cache is dropped)."""
    mm = np.load(os.path.join(mp, "warm", "w.npy"), mmap_mode="r")
    np.array(mm[mm.shape[0] // 2])
    del mm


class Mount:
    def __init__(self, src, mp, opts="", pin=None, xattr=True):
        self.mp = mp
        os.makedirs(mp, exist_ok=True)
        if is_mounted(mp):
            subprocess.run(["fusermount3", "-u", mp])
        # xattr: the counters (`user.bloscfs.stats`) are read from the mount.
        opts = ",".join(o for o in ("xattr" if xattr else "", opts) if o)
        cmd = [BIN, "-f"] + (["-o", opts] if opts else []) + [src, mp]
        if pin is not None:
            cmd = ["taskset", "-c", str(pin)] + cmd
        self.p = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
        wait_mounted(mp)

    def rss_hwm_kib(self):
        with open(f"/proc/{self.p.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0

    def close(self):
        subprocess.run(["fusermount3", "-u", self.mp])
        self.p.wait()


def big_dir(d, n):
    """A directory of `n` empty files under `d` (made once)."""
    path = os.path.join(d, f"files-{n}")
    last = os.path.join(path, f"f{n - 1:07d}")
    if not os.path.exists(last):
        os.makedirs(path, exist_ok=True)
        for i in range(n):
            open(os.path.join(path, f"f{i:07d}"), "wb").close()
    return path


def ls_many(src, mp, n, rounds=3):
    """`ls -l` of `src` through a fresh mount vs the source itself: time
    ratio (median of the rounds), daemon peak memory per entry."""
    def ls(p):
        t0 = time.perf_counter()
        out = sh(f"ls -l {p} | wc -l").stdout
        t = time.perf_counter() - t0
        assert int(out) == n + 1, out
        return t

    def ours():
        m = Mount(src, mp, xattr=False)  # the default
        t = ls(mp)
        hwm = m.rss_hwm_kib()
        m.close()
        return t, hwm

    ls(src)  # the source's inodes in memory, as a listing the user just made
    ratios, ts, hwms = [], [], []
    for k in range(rounds):
        if k % 2 == 0:
            (t, hwm), s = ours(), ls(src)
        else:
            s, (t, hwm) = ls(src), ours()
        ratios.append(t / s)
        ts.append(t)
        hwms.append(hwm)
    r = statistics.median(ratios)
    row("tree", f"ls -l of {n:,} files: fresh mount vs source (ratios {[round(x, 2) for x in sorted(ratios)]}; "
        "ours/source)", statistics.median(ts), "s", r, "<= 3x")
    row("tree", f"daemon VmHWM per entry after ls -l of {n:,} files", statistics.median(hwms) * 1024 / n,
        "B", None, "")


class Floor:
    def __init__(self, mp, size, keep=False):
        self.mp = mp
        os.makedirs(mp, exist_ok=True)
        self.p = subprocess.Popen([FLOOR, mp, str(size)] + (["keep_cache"] if keep else []), stderr=subprocess.DEVNULL)
        wait_mounted(mp)
        set_readahead(mp)

    def close(self):
        subprocess.run(["fusermount3", "-u", self.mp])
        self.p.wait()


def set_readahead(mp):
    with open("/proc/self/mountinfo") as f:
        for l in f:
            p = l.split(" ")
            if p[4] == mp:
                try:
                    with open(f"/sys/class/bdi/{p[2]}/read_ahead_kb", "w") as g:
                        g.write("1024")
                except OSError:
                    pass


def read_seq(path, bs=MB, start=0):
    fd = os.open(path, os.O_RDONLY)
    os.lseek(fd, start, os.SEEK_SET)
    n = 0
    try:
        while True:
            b = os.read(fd, bs)
            if not b:
                break
            n += len(b)
    finally:
        os.close(fd)
    return n


def latencies(op, args):
    """Seconds each call `op(x)` takes, for `x` in `args`, in order."""
    out = []
    for x in args:
        t = time.perf_counter()
        op(x)
        out.append(time.perf_counter() - t)
    return out


def daemon_stats(mp):
    """The counters of the bloscfs mounted at `mp` (its `user.bloscfs.stats` xattr)."""
    text = os.getxattr(mp, "user.bloscfs.stats").decode()
    return {k: int(v) for k, v in (kv.split("=") for kv in text.split())}


def read_range(fd, start, n, bs=4 * MB):
    """Read `n` bytes of `fd` from `start` in `bs` preads; the bytes read."""
    done = 0
    while done < n:
        b = os.pread(fd, min(bs, n - done), start + done)
        if not b:
            break
        done += len(b)
    return done


def make_series(d, size, codec, filt, name):
    p = os.path.join(d, name + ".b2frame")
    if os.path.exists(p):
        return p
    n = size // 8
    rng = np.random.default_rng(42)
    s = blosc2.SChunk(chunksize=8 * MB, urlpath=p, mode="w",
                      cparams=dict(typesize=8, codec=codec, clevel=1 if codec == blosc2.Codec.ZSTD else 5,
                                   filters=[filt]))
    step = MB  # elements per piece: 8 MiB
    x0 = 0.0
    for i in range(0, n, step):
        k = min(step, n - i)
        x = x0 + np.cumsum(rng.normal(size=k)) * 0.01
        x0 = x[-1]
        s.append_data(np.round(x, 3).astype("<f8").tobytes())
    return p


def fmt(x, unit=""):
    return f"{x:,.3f}{unit}" if isinstance(x, float) else f"{x}{unit}"


ROWS = []


def row(section, what, value, unit, ratio=None, target=None):
    ROWS.append((section, what, value, unit, ratio, target))
    r = f"  ratio {ratio:.2f}x" if ratio is not None else ""
    t = f"  (target {target})" if target else ""
    print(f"[{section}] {what}: {value:,.3f} {unit}{r}{t}", flush=True)


def npy_blocks(src, mp, a):
    """5b. `.npy` sequential reads of one array stored with narrow, square
    and row blocks (3000x2500 float32, chunks of 1000 rows), each
    side cold: `cat` of the mount with cache_size=16M (blocks decoded,
    source bytes read, daemon VmHWM) vs python-blosc2 open + arr[...]."""
    shape = (3000, 2500)
    layouts = {"narrow": (1000, 25), "narrow-wide": (100, 250), "square": (250, 250), "rows": (40, 2500)}
    rng = np.random.default_rng(7)
    x = (np.cumsum(rng.normal(size=shape), axis=1) * 0.01).round(3).astype("<f4")
    for name, blocks in layouts.items():
        p = os.path.join(src, f"blocks-{name}.b2nd")
        if not os.path.exists(p):
            blosc2.asarray(x, urlpath=p, mode="w", chunks=(1000, 2500), blocks=blocks,
                           cparams=dict(codec=blosc2.Codec.ZSTD, clevel=1, filters=[blosc2.Filter.SHUFFLE]))
        arr = blosc2.open(p)
        assert arr.blocks == blocks, arr.blocks
        nblocks = int(np.prod([-(-c // b) for c, b in zip(arr.chunks, arr.blocks)])) * arr.schunk.nchunks
        npy = os.path.join(mp, f"blocks-{name}.npy")

        def ours():
            drop_caches()
            m = Mount(src, mp, opts="cache_size=16M")
            t0 = time.perf_counter()
            n = read_seq(npy)
            t = time.perf_counter() - t0
            st, hwm, size = daemon_stats(mp), m.rss_hwm_kib(), os.path.getsize(npy)
            m.close()
            assert n == size and n > x.nbytes
            return t, st, hwm

        def theirs():
            drop_caches()
            t0 = time.perf_counter()
            blosc2.open(p)[...]
            return time.perf_counter() - t0

        got = {"ours": [], "theirs": []}
        for k in range(max(3, a.runs) if not a.quick else 1):
            for side in (["ours", "theirs"] if k % 2 == 0 else ["theirs", "ours"]):
                got[side].append(ours() if side == "ours" else theirs())
        m = Mount(src, mp)
        assert (np.load(npy) == x).all()
        m.close()
        t_ours = statistics.median(t for t, _, _ in got["ours"])
        t_ref = statistics.median(got["theirs"])
        _, st, hwm = got["ours"][-1]
        row("npy blocks", f"{name}: {shape[0]}x{shape[1]} f4, chunks {arr.chunks}, blocks {blocks}: cat of the "
            f".npy, cache_size=16M ({st['blocks_decoded']:,} block decodes of {nblocks:,}, "
            f"{st['source_bytes_read'] / os.path.getsize(p):.2f}x the file read, daemon VmHWM {hwm >> 10} MiB) "
            f"vs python-blosc2 arr[...] ({t_ref * 1e3:.1f} ms)", t_ours * 1e3, "ms", t_ref / t_ours)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="512M")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small data, 1 run, skip the 16 GiB and 10,000-file parts")
    ap.add_argument("--doc", help="replace the table in this Markdown file (between its marker lines)")
    ap.add_argument("--save", help="write the run's results as JSON into this directory "
                    "(default with --doc: bench/runs/ beside the doc)")
    ap.add_argument("--table", help="a saved run (JSON): print its table, or write it to --doc; measures nothing")
    ap.add_argument("--npy-blocks", action="store_true", help="only the .npy block-layout reads (5b)")
    ap.add_argument("--ls", action="store_true", help="only ls -l of 100,000 (and without --quick 1,000,000) files (7b)")
    ap.add_argument("--remote", action="store_true", help="only the remote rows: S3 (moto) and Caterva2 on loopback (9)")
    ap.add_argument("--scale", action="store_true", help="only the scaling rows: 1, 2, 4, ... CPUs by taskset (10)")
    a = ap.parse_args()
    if (a.remote or a.scale) and a.doc:
        sys.exit("--doc writes the whole table: with --remote or --scale use --save DIR")
    if a.doc:
        doc_table_span(open(a.doc).read(), a.doc)  # fail now, not after the run
    if a.table:
        with open(a.table) as f:
            run = json.load(f)
        if a.doc:
            write_doc(a.doc, run, a.table)
        else:
            print(table_md(run, a.table), end="")
        return
    size = int(a.size[:-1]) * {"K": 1 << 10, "M": MB, "G": 1 << 30}[a.size[-1]] if a.size[-1] in "KMG" else int(a.size)
    if a.quick:
        size, a.runs = min(size, 64 * MB), 1
    d = os.environ.get("BENCH_DIR", "/tmp/bloscfs-bench")
    src = os.path.join(d, "src")
    os.makedirs(src, exist_ok=True)
    mp = os.path.join(d, "mnt")
    fmp = os.path.join(d, "floor")
    for b in [BIN] + ([] if a.npy_blocks or a.ls or a.remote else [FLOOR]):
        if not os.path.exists(b):
            sys.exit(f"{b} missing: run `cargo build --release` and "
                     "`cargo build --release -p fusefloor`")
    C, F = blosc2.Codec, blosc2.Filter
    variants = [("zstd-shuffle", C.ZSTD, F.SHUFFLE), ("lz4-shuffle", C.LZ4, F.SHUFFLE),
                ("blosclz-shuffle", C.BLOSCLZ, F.SHUFFLE), ("lz4-bitshuffle", C.LZ4, F.BITSHUFFLE),
                ("zlib-shuffle", C.ZLIB, F.SHUFFLE)]
    if a.npy_blocks:
        npy_blocks(src, mp, a)
        return
    if a.ls:
        for n in [100_000] + ([] if a.quick else [1_000_000]):
            ls_many(big_dir(d, n), mp, n)
        return
    if a.remote:
        blosc2.set_nthreads(2)
        remote.run(sys.modules[__name__], a, d)
        save_or_doc(a, size)
        return
    if a.scale:
        scale.run(sys.modules[__name__], a, d, size)
        save_or_doc(a, size)
        return
    print(f"making data in {src} ({size >> 20} MiB per series)...", flush=True)
    files = {name: make_series(src, size, c, f, f"{name}-{size >> 20}M") for name, c, f in variants}
    blosc2.set_nthreads(2)

    def decompress_all(s):
        """The reference reading a super-chunk whole, in-process."""
        for i in range(s.nchunks):
            s.decompress_chunk(i)

    # 1. decode-only throughput
    dec_rate = {}
    for name, p in files.items():
        s = blosc2.open(p)
        nbytes = s.nbytes
        t_ref = median_time(lambda: decompress_all(s), a.runs)
        t_us = median_time(lambda: subprocess.run([BIN, "cat", p], stdout=subprocess.DEVNULL, check=True), a.runs)
        dec_rate[name] = nbytes / t_us
        row("decode", f"{name}: bloscfs cat {nbytes / t_us / 1e9:.2f} GB/s vs python-blosc2 {nbytes / t_ref / 1e9:.2f} GB/s",
            nbytes / t_us / 1e9, "GB/s", t_ref / t_us)

    # 2. cold sequential through a fresh mount vs in-process vs page cache vs FUSE floor
    p0 = files["zstd-shuffle"]
    nbytes = blosc2.open(p0).nbytes
    read_seq(p0)
    t_raw = median_time(lambda: read_seq(p0), a.runs)
    fl = Floor(fmp, nbytes)
    t_floor = median_time(lambda: read_seq(os.path.join(fmp, "data")), a.runs)
    fl.close()
    floor_rate = nbytes / t_floor
    row("sequential", "raw source bytes from the page cache (floor)", nbytes / t_raw / 1e9, "GB/s")
    row("sequential", "empty FUSE fs from memory (FUSE floor)", floor_rate / 1e9, "GB/s")
    for name in ["zstd-shuffle", "lz4-shuffle"]:
        p = files[name]
        s = blosc2.open(p)
        t_ref = median_time(lambda: decompress_all(s), a.runs)
        t_by = {}
        for opts in ["", "decode_ahead=4M", "uring"]:
            ts = []
            for _ in range(a.runs):
                drop_caches()
                m = Mount(src, mp, opts=opts)
                t = time.perf_counter()
                read_seq(os.path.join(mp, os.path.basename(p)[: -len(".b2frame")]))
                ts.append(time.perf_counter() - t)
                m.close()
            t_by[opts] = statistics.median(ts)
        t_us = t_by[""]
        ceiling = 1 / (1 / floor_rate + 1 / dec_rate[name])
        tgt = "0.6x" if name.startswith("zstd") else "0.45x"
        row("sequential", f"{name}: cold mount 1 MiB reads vs C-Blosc2 in-process", nbytes / t_us / 1e9, "GB/s",
            t_ref / t_us, tgt)
        row("sequential", f"{name}: vs ceiling 1/(1/FUSE floor + 1/decode)", nbytes / t_us / 1e9, "GB/s",
            (nbytes / t_us) / ceiling, "0.9x")
        row("sequential", f"{name}: with -o decode_ahead=4M (ratio > 1: the default is faster)",
            nbytes / t_by["decode_ahead=4M"] / 1e9, "GB/s", t_by["decode_ahead=4M"] / t_us)
        row("sequential", f"{name}: with -o uring (ratio > 1: the default is faster)",
            nbytes / t_by["uring"] / 1e9, "GB/s", t_by["uring"] / t_us)

    # 3. cold random 4 KiB preads vs get_slice: rounds of a fresh mount
    # reading all offsets and get_slice reading them (caches dropped before
    # each; which goes first alternates), the median of the rounds' p50
    # ratios. A single round of each varies widely between repeats on a
    # shared machine; reading both in the same round, pair by pair, would let
    # get_slice's buffered reads (and their read-ahead) queue on the disk in
    # front of ours.
    n_r = 300 if not a.quick else 100
    rounds = 6 if not a.quick else 1
    rng = random.Random(1)
    offs = [rng.randrange(0, nbytes - 4096) // 8 * 8 for _ in range(n_r)]
    all_cpus = os.sched_getaffinity(0)
    path = os.path.join(mp, os.path.basename(p0)[: -len(".b2frame")])
    pct = lambda v, q: v[min(len(v) - 1, int(len(v) * q))]

    def ours_round(pin, opts=""):
        drop_caches()
        m = Mount(src, mp, opts=opts, pin=pin)
        fd = os.open(path, os.O_RDONLY)
        lat = latencies(lambda o: os.pread(fd, 4096, o), offs)
        stats = daemon_stats(mp)
        # Block-cache hits: the page cache of the mounted file dropped, the
        # next 4 KiB of blocks read above (same block, so it is cached).
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        hits = latencies(lambda o: os.pread(fd, 4096, o + 4096 if o + 8192 < nbytes else o), offs[:100])
        os.close(fd)
        m.close()
        return sorted(lat), sorted(hits), int(stats.get("source_direct_reads", 0))

    def theirs_round(at=offs):
        """get_slice of 4 KiB at each offset of `at`, cold; sorted latencies."""
        drop_caches()
        s = blosc2.open(p0)
        return sorted(latencies(lambda o: s.get_slice(o // 8, o // 8 + 512), at))

    # A virtual machine's disk may be a file the host caches: a block read a
    # second time then comes back sooner, even with O_DIRECT. One get_slice
    # pass first, so no round pays for the host's cold cache.
    theirs_round()

    def random_rounds(pin, opts=""):
        # Pinned: the daemon, this reader and get_slice all on CPU 0.
        os.sched_setaffinity(0, {pin} if pin is not None else all_cpus)
        res = []
        for r in range(rounds):
            # Which side reads first alternates between rounds.
            if r % 2 == 0:
                lat, hits, direct = ours_round(pin, opts)
                theirs = theirs_round()
            else:
                theirs = theirs_round()
                lat, hits, direct = ours_round(pin, opts)
            res.append((lat, theirs, hits, direct))
        os.sched_setaffinity(0, all_cpus)
        med = statistics.median
        return (med(pct(l, 0.5) for l, _, _, _ in res), med(pct(r, 0.5) for _, r, _, _ in res),
                med(pct(l, 0.5) / pct(r, 0.5) for l, r, _, _ in res),
                med(pct(l, 0.99) / pct(r, 0.99) for l, r, _, _ in res),
                med(pct(h, 0.5) for _, _, h, _ in res), [d for _, _, _, d in res],
                sorted(round(pct(l, 0.5) / pct(r, 0.5), 2) for l, r, _, _ in res),
                med(pct(l, 0.99) for l, _, _, _ in res))

    for pin in [None, 0]:
        p50, r50, ratio, ratio99, hit, direct, all_r, p99 = random_rounds(pin)
        tag = "pinned cpu0" if pin is not None else "unpinned"
        row("random 4K", f"{tag}: p50 {p50 * 1e6:.0f} us vs get_slice {r50 * 1e6:.0f} us, median of {rounds} rounds "
            f"(ratios {all_r}; ours/theirs; {min(direct)}-{max(direct)} of {n_r} block reads O_DIRECT)",
            p50 * 1e6, "us", ratio, "<= 1.0x")
        row("random 4K", f"{tag}: p99 (median of the rounds; ratio = median of ours/theirs)", p99 * 1e6, "us", ratio99)
        row("random 4K", f"{tag}: block-cache hit p50", hit * 1e6, "us", None, "<= 30 us")
    # The same unpinned, with block reads through the page cache (no O_DIRECT).
    p50, r50, ratio, _, _, _, all_r, _ = random_rounds(None, "source_io=buffered")
    row("random 4K", f"unpinned, -o source_io=buffered: p50 {p50 * 1e6:.0f} us vs get_slice {r50 * 1e6:.0f} us "
        f"(ratios {all_r}; the default reads cold blocks with O_DIRECT)", p50 * 1e6, "us", ratio)
    # The same through the kernel's FUSE io_uring queues (where it offers them).
    p50, r50, ratio, _, _, _, all_r, _ = random_rounds(None, "uring")
    row("random 4K", f"unpinned, -o uring: p50 {p50 * 1e6:.0f} us vs get_slice {r50 * 1e6:.0f} us "
        f"(ratios {all_r}; {uring_offered()})", p50 * 1e6, "us", ratio, "<= 1.0x")

    # 4. warm re-read (kernel page cache kept across opens). Both mounted at
    # once and re-read alternately, since measured one after the other the
    # ratio follows the machine's drift. The file mounted and read first can
    # re-read slower whatever serves it, so the order alternates between
    # mount pairs, and the same procedure run on two empty FUSE file systems
    # shows what spread the method itself has. The median of the pairs' median ratios.
    # A re-read is only warm if the daemon serves none of it: its counter
    # of bytes served is read before and after.
    def warm_pairs(first, second, pairs):
        """Median re-read time ratios second/first over `pairs` mount pairs."""
        ratios, t_first, served = [], [], 0
        for k in range(pairs):
            a_, b_ = (first, second) if k % 2 == 0 else (second, first)
            ma, pa, ca = a_()
            read_seq(pa)
            mb, pb, cb = b_()
            read_seq(pb)
            m1, p1, c1 = (ma, pa, ca) if k % 2 == 0 else (mb, pb, cb)
            m2, p2, _ = (mb, pb, cb) if k % 2 == 0 else (ma, pa, ca)
            before = c1()
            ts = []
            for _ in range(5):
                ts.append((median_time(lambda: read_seq(p1), 1), median_time(lambda: read_seq(p2), 1)))
            served += c1() - before
            ma.close()
            mb.close()
            ratios.append(statistics.median(t2 / t1 for t1, t2 in ts))
            t_first.append(statistics.median(t1 for t1, _ in ts))
        return statistics.median(ratios), sorted(round(r, 2) for r in ratios), statistics.median(t_first), served

    def ours_keep():
        return Mount(src, mp), path, lambda: daemon_stats(mp)["bytes_served"]

    def floor_keep(at):
        def f():
            return Floor(at, nbytes, keep=True), os.path.join(at, "data"), lambda: 0
        return f

    pairs_n = 12 if not a.quick else 2
    fmp2 = os.path.join(d, "floor2")
    ratio, all_r, t_w, served = warm_pairs(ours_keep, floor_keep(fmp), pairs_n)
    row("warm re-read", f"bloscfs vs empty FUSE fs, both with keep_cache (median of {pairs_n} mount pairs, "
        f"mount order alternating; pair ratios {all_r}; bytes the daemon served during the re-reads: {served})",
        nbytes / t_w / 1e9, "GB/s", ratio, ">= 0.9x")
    ratio, all_r, t_w, _ = warm_pairs(floor_keep(fmp2), floor_keep(fmp), pairs_n)
    row("warm re-read", f"control: one empty FUSE fs vs another, the same procedure (pair ratios {all_r}; "
        "1.0x is the method's truth)", nbytes / t_w / 1e9, "GB/s", ratio)

    # 5. a 2-D b2nd array: one row and a full scan, each side cold (page
    # cache dropped) and timed from opening the file; rounds alternate
    # which side goes first, medians. Our mount is made, and has served
    # another file, before the caches are dropped and the clock starts, as
    # a user's running mount has.
    make_warm(src)
    ap2 = os.path.join(src, "grid.b2nd")
    rows_n = max(1024, int((size // 8) ** 0.5))
    if not os.path.exists(ap2):
        x = np.linspace(0, 1, rows_n * rows_n).reshape(rows_n, rows_n)
        blosc2.asarray(x, urlpath=ap2, mode="w")
    rows_n = blosc2.open(ap2).shape[0]
    gpath = os.path.join(mp, "grid.npy")
    got = {}

    def ours_row():
        m = Mount(src, mp)
        warm(mp)
        drop_caches()
        t0 = time.perf_counter()
        mm = np.load(gpath, mmap_mode="r")
        got["ours"] = np.array(mm[rows_n // 2, :])
        t = time.perf_counter() - t0
        del mm
        m.close()
        return t

    def theirs_row():
        drop_caches()
        t0 = time.perf_counter()
        got["theirs"] = blosc2.open(ap2)[rows_n // 2, :]
        return time.perf_counter() - t0

    def ours_scan():
        m = Mount(src, mp)
        warm(mp)
        drop_caches()
        t0 = time.perf_counter()
        np.load(gpath)
        t = time.perf_counter() - t0
        m.close()
        return t

    def theirs_scan():
        drop_caches()
        t0 = time.perf_counter()
        blosc2.open(ap2)[...]
        return time.perf_counter() - t0

    times = {f: [] for f in (ours_row, theirs_row, ours_scan, theirs_scan)}
    for k in range(max(3, a.runs) if not a.quick else 1):
        for pair in [(ours_row, theirs_row), (ours_scan, theirs_scan)]:
            for f in (pair if k % 2 == 0 else pair[::-1]):
                times[f].append(f())
    assert (got["ours"] == got["theirs"]).all()
    t_row, t_rrow, t_scan, t_rscan = (statistics.median(times[f]) for f in times)
    row("b2nd", f"one row of {rows_n}x{rows_n}, cold, from opening the file: np.load(mmap_mode='r') of the "
        f"mount vs python-blosc2 open + slice ({t_rrow * 1e3:.2f} ms)", t_row * 1e3, "ms", t_rrow / t_row)
    row("b2nd", f"full scan, cold: np.load of the mount vs python-blosc2 open + arr[...] ({t_rscan * 1e3:.1f} ms)",
        t_scan * 1e3, "ms", t_rscan / t_scan)

    npy_blocks(src, mp, a)

    if not a.quick:
        # 6. RSS after reading 16 GiB with cache_size=64M
        zp = os.path.join(src, "zeros16g.b2nd")
        if not os.path.exists(zp):
            z = blosc2.zeros((16 << 30,), dtype="u1", chunks=(8 * MB,), blocks=(256 << 10,), urlpath=zp, mode="w")
            z[: 64 * MB] = np.frombuffer(np.random.default_rng(3).bytes(64 * MB), dtype="u1")
        # Zero chunks vs the floor: both mounted at once and the same 512 MiB
        # segments read from each in turn (which goes first alternating), so
        # slow drifts of the host weigh on both alike; every segment is read
        # once, so every read is cold. The file system mounted second can
        # read faster, whichever it is, so the first half of the
        # span is read with one side mounted first and the second half with
        # the other first; and the same procedure on two empty FUSE file
        # systems shows the spread of the method itself. The median of the
        # segment pairs' ratios. The frame's first 64 MiB are stored (random)
        # data, read from the source; the comparison starts past them (the
        # .npy header and those 64 MiB).
        z0 = 128 * MB
        seg = 512 * MB
        zpath = os.path.join(mp, "zeros16g.npy")
        m = Mount(src, mp, opts="cache_size=64M")
        zn = os.stat(zpath).st_size - z0
        m.close()

        def ours_zeros():
            return Mount(src, mp, opts="cache_size=64M"), zpath

        def floor_zeros(at):
            return lambda: (Floor(at, z0 + zn), os.path.join(at, "data"))

        def segment_pairs(side_a, side_b):
            """Segment ratios (time of b / time of a) and total times."""
            spent, ratios = [0.0, 0.0], []
            offs_z = list(range(z0, z0 + zn, seg))
            halves = [offs_z[: len(offs_z) // 2], offs_z[len(offs_z) // 2:]]
            for half, part in enumerate(halves):
                drop_caches()
                if half == 0:
                    ha, pa = side_a()
                    hb, pb = side_b()
                else:
                    hb, pb = side_b()
                    ha, pa = side_a()
                fds = [os.open(pa, os.O_RDONLY), os.open(pb, os.O_RDONLY)]
                for k, off in enumerate(part):
                    n = min(seg, z0 + zn - off)
                    ts = [0.0, 0.0]
                    for side in ((0, 1) if k % 2 == 0 else (1, 0)):
                        t0 = time.perf_counter()
                        got = read_range(fds[side], off, n)
                        ts[side] = time.perf_counter() - t0
                        assert got == n
                    spent = [spent[0] + ts[0], spent[1] + ts[1]]
                    ratios.append(ts[1] / ts[0])
                for fd in fds:
                    os.close(fd)
                ha.close()
                hb.close()
            return ratios, spent

        ratios, spent = segment_pairs(ours_zeros, floor_zeros(fmp))
        c_ratios, _ = segment_pairs(floor_zeros(fmp2), floor_zeros(fmp))
        # The memory figure: one daemon reading all 16 GiB.
        drop_caches()
        m = Mount(src, mp, opts="cache_size=64M")
        with open(zpath, "rb") as f:
            assert read_range(f.fileno(), 0, z0 + zn) == z0 + zn
        hwm = m.rss_hwm_kib()
        m.close()
        row("memory", "daemon VmHWM after reading 16 GiB (cache_size=64M)", hwm / 1024, "MiB", None, "<= 96 MiB")
        q = statistics.quantiles(ratios, n=4)
        row("memory", f"zero chunks ({zn / GB:.1f} GiB) vs the FUSE floor over the same bytes ({zn / spent[1] / 1e9:.2f} "
            f"GB/s), both mounted, {len(ratios)} segments of 512 MiB read alternately (segment ratios: quartiles "
            f"{q[0]:.2f}, {q[1]:.2f}, {q[2]:.2f})", zn / spent[0] / 1e9, "GB/s", statistics.median(ratios),
            "zero chunks at the FUSE floor (1.0x)")
        q = statistics.quantiles(c_ratios, n=4)
        row("memory", f"control: one empty FUSE fs vs another, the same procedure (segment ratios: quartiles "
            f"{q[0]:.2f}, {q[1]:.2f}, {q[2]:.2f}; 1.0x is the method's truth)", statistics.median(c_ratios), "x",
            statistics.median(c_ratios))

        # 6b. RSS after random reads over files of three block sizes (128,
        # 256, 512 KiB), page cache dropped so every read reaches the daemon.
        m = Mount(src, mp, opts="cache_size=64M")
        series = list(files.values())
        for p in series:
            read_seq(os.path.join(mp, os.path.basename(p)[: -len(".b2frame")]))
        drop_caches()
        rng2 = random.Random(3)
        fds = [os.open(os.path.join(mp, os.path.basename(p)[: -len(".b2frame")]), os.O_RDONLY) for p in series]
        for i in range(3000):
            os.pread(fds[i % len(fds)], 4096, rng2.randrange(0, nbytes - 4096))
        for fd in fds:
            os.close(fd)
        row("memory", f"daemon VmHWM after {len(series)} x {nbytes // MB} MiB read whole, then 3,000 random 4 KiB "
            "reads across them (cache_size=64M)", m.rss_hwm_kib() / 1024, "MiB", None, "<= 96 MiB")
        m.close()

        # 7. 10,000 small containers: mount + ls -l
        tree = os.path.join(d, "tree")
        if not os.path.exists(os.path.join(tree, "f09999.b2")):
            os.makedirs(tree, exist_ok=True)
            c = blosc2.compress2(np.arange(1000, dtype="<i4").tobytes(), typesize=4)
            for i in range(10_000):
                with open(os.path.join(tree, f"f{i:05d}.b2"), "wb") as f:
                    f.write(c)
        drop_caches()
        t0 = time.perf_counter()
        sh(f"{BIN} {tree} {mp}")
        t_mount = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = sh(f"ls -l {mp} | wc -l").stdout
        t_ls = time.perf_counter() - t0
        sh(f"fusermount3 -u {mp}")
        assert int(out) >= 10_000
        row("tree", "mount of 10,000 containers", t_mount, "s", None, "< 0.5 s")
        row("tree", "ls -l of 10,000 containers, cold", t_ls, "s", None, "< 1.5 s")

    # 7b. ls -l of a directory of many plain files: a fresh mount each
    # round (no listing in the daemon, no names in the kernel) against the
    # source with its inodes cached, rounds alternating which goes first.
    for n in [100_000] + ([] if a.quick else [1_000_000]):
        ls_many(big_dir(d, n), mp, n)

    # 8. ratarmount on the same bytes as .tar.gz. Each side gets a fresh
    # mount with the page cache dropped (ratarmount's index is kept, as a
    # user's would be), in the foreground so that its unmount is waited
    # for; random rounds alternate which side goes first. Our cold reads
    # are checked to have decoded their blocks (a warm read would give a
    # bogus ratio).
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "ratarmount==1.*"], check=True,
                       capture_output=True, timeout=300)
        rat = os.path.join(os.path.dirname(sys.executable), "ratarmount")
        tgz = os.path.join(d, f"series-{size >> 20}M.tar.gz")
        raw = os.path.join(d, "series.raw")
        if not os.path.exists(tgz):
            subprocess.run([BIN, "cat", p0], stdout=open(raw, "wb"), check=True)
            with tarfile.open(tgz, "w:gz", compresslevel=1) as t:
                t.add(raw, arcname="series")
            os.remove(raw)
        rmp = os.path.join(d, "rat")
        os.makedirs(rmp, exist_ok=True)
        for _ in range(2):
            if is_mounted(rmp):
                subprocess.run(["fusermount3", "-u", rmp], capture_output=True)

        class Rat:
            def __init__(self):
                self.p = subprocess.Popen([rat, "-f", tgz, rmp], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
                wait_mounted(rmp)  # the first mount builds the index (minutes)

            def close(self):
                subprocess.run(["fusermount3", "-u", rmp], capture_output=True)
                self.p.wait(timeout=60)

        Rat().close()
        # ratarmount decodes and keeps whole seek-point intervals (MiBs), so
        # a read near an earlier one is a hit in its cache: with uniform
        # reads a good part are, and the p50 falls anywhere between the two
        # modes from run to run. Cold reads are reads into
        # regions nothing read before: one read in each 32 MiB stripe, in
        # random order. The same offsets for both sides.
        stripe = 32 * MB
        cold_offs = [k * stripe + rng.randrange(0, stripe - 4096) // 8 * 8 for k in range(nbytes // stripe)]
        rng.shuffle(cold_offs)

        def p50_4k(fpath, offsets):
            """Median latency of 4 KiB preads of `fpath` at `offsets`, in order."""
            fd = os.open(fpath, os.O_RDONLY)

            def read4k(o):
                assert len(os.pread(fd, 4096, o)) == 4096

            lat = latencies(read4k, offsets)
            os.close(fd)
            return statistics.median(lat)

        def rat_random():
            drop_caches()
            r = Rat()
            t = p50_4k(os.path.join(rmp, "series"), cold_offs)
            r.close()
            return t

        def ours_random():
            drop_caches()
            m = Mount(src, mp)
            t = p50_4k(path, cold_offs)
            misses = daemon_stats(mp)["cache_misses"]
            m.close()
            assert misses >= len(cold_offs), f"bloscfs random reads were not cold ({misses} block misses)"
            return t

        def rat_seq():
            drop_caches()
            r = Rat()
            t = median_time(lambda: read_seq(os.path.join(rmp, "series")), 1)
            r.close()
            return t

        def ours_seq():
            drop_caches()
            m = Mount(src, mp)
            t = median_time(lambda: read_seq(path), 1)
            m.close()
            return t

        # The reference itself against ratarmount: python-blosc2 in-process
        # on the same frame, cold, the same reads. It says what the targets
        # ask of the machine the bench runs on.
        def ref_random():
            return statistics.median(theirs_round(cold_offs))

        def ref_seq():
            drop_caches()
            s = blosc2.open(p0)
            return median_time(lambda: decompress_all(s), 1)

        ref_random()  # the host's cache of the VM's disk (see section 3)
        rr = 3 if not a.quick else 1
        r_ratios, ours_p50, rat_p50, ref_p50 = [], [], [], []
        for k in range(rr):
            if k % 2 == 0:
                o, f, t = ours_random(), ref_random(), rat_random()
            else:
                t, f, o = rat_random(), ref_random(), ours_random()
            ours_p50.append(o)
            rat_p50.append(t)
            ref_p50.append(f)
            r_ratios.append(t / o)
        t_rseq, t_seq, t_fseq = rat_seq(), ours_seq(), ref_seq()
        row("ratarmount", f"sequential: bloscfs vs ratarmount (.tar.gz, {nbytes / t_rseq / 1e9:.2f} GB/s)",
            nbytes / t_seq / 1e9, "GB/s", t_rseq / t_seq, ">= 5x")
        row("ratarmount", f"random 4K p50: ratarmount {statistics.median(rat_p50) * 1e3:.1f} ms / bloscfs "
            f"(median of {rr} rounds of {len(cold_offs)} reads, one per 32 MiB; ratios "
            f"{sorted(round(x, 1) for x in r_ratios)})",
            statistics.median(ours_p50) * 1e6, "us", statistics.median(r_ratios), ">= 100x")
        row("ratarmount", "reference: C-Blosc2 in-process (python-blosc2, 2 threads, cold) sequential vs ratarmount",
            nbytes / t_fseq / 1e9, "GB/s", t_rseq / t_fseq)
        row("ratarmount", "reference: C-Blosc2 in-process get_slice, cold, the same random reads: ratarmount p50 / "
            f"get_slice p50 (ratios {sorted(round(t / f, 1) for t, f in zip(rat_p50, ref_p50))})",
            statistics.median(ref_p50) * 1e6, "us",
            statistics.median(t / f for t, f in zip(rat_p50, ref_p50)))
    except Exception as e:  # noqa: BLE001
        print(f"[ratarmount] skipped: {e}")

    # 9. remote sources on loopback servers (scripts/bench/remote.py)
    try:
        remote.run(sys.modules[__name__], a, d)
    except Exception as e:  # noqa: BLE001
        print(f"[remote] skipped: {e}")

    # 10. scaling with the CPUs: 1, 2, 4, ... up to the machine (scripts/bench/scale.py)
    if not a.quick:
        try:
            scale.run(sys.modules[__name__], a, d, size)
        except Exception as e:  # noqa: BLE001
            print(f"[scale] skipped: {e}")

    save_or_doc(a, size)


def save_or_doc(a, size):
    """With --doc or --save: the run's raw results saved, and the doc's table written."""
    if a.doc or a.save:
        run = run_record(a, size)
        saved = save_run(run, a.save or os.path.join(os.path.dirname(os.path.abspath(a.doc)), "bench", "runs"))
        print(f"wrote {saved}")
        if a.doc:
            write_doc(a.doc, run, saved)


TABLE_BEGIN = "<!-- bench.py table: written by scripts/bench/bench.py --doc, do not edit by hand -->"
TABLE_END = "<!-- bench.py table end -->"


def run_record(a, size):
    """What a run measured and where: the raw results saved as JSON."""
    cpu = sh("grep -m1 'model name' /proc/cpuinfo").stdout.split(":")[1].strip()
    try:
        commit = sh(f"git -C {ROOT} describe --always --dirty").stdout.strip()
    except subprocess.CalledProcessError:
        commit = "unknown"
    return {
        "date": time.strftime("%Y-%m-%d"),
        "command": f"scripts/bench/bench.py --size {a.size} --runs {a.runs}" + (" --quick" if a.quick else "")
        + (" --remote" if a.remote else "") + (" --scale" if a.scale else ""),
        "machine": {"cpus": os.cpu_count(), "cpu": cpu, "kernel": os.uname().release},
        "series_mib": size >> 20,
        "versions": {"bloscfs": commit, "python-blosc2": blosc2.__version__,
                     "c-blosc2": blosc2.blosclib_version.split()[0]},
        "rows": [{"section": s, "measurement": w, "value": v, "unit": u, "ratio": r, "target": t}
                 for s, w, v, u, r, t in ROWS],
    }


def save_run(run, d):
    """Write `run` as d/DATE.json (DATE-2.json, ... if taken); its path."""
    os.makedirs(d, exist_ok=True)
    k, path = 1, os.path.join(d, f"{run['date']}.json")
    while os.path.exists(path):
        k += 1
        path = os.path.join(d, f"{run['date']}-{k}.json")
    with open(path, "w") as f:
        json.dump(run, f, indent=1)
        f.write("\n")
    return path


def table_md(run, source=None):
    """The Markdown table of a run, with a line saying how it was measured."""
    m, v = run["machine"], run["versions"]
    out = (f"Measured by `{run['command']}` on {run['date']}, {m['cpus']} vCPUs ({m['cpu']}), "
           f"{run['series_mib']} MiB float64 series, 8 MiB chunks, bloscfs {v['bloscfs']}, "
           f"python-blosc2 {v['python-blosc2']} (C-Blosc2 {v['c-blosc2']}); medians of the runs"
           + (f"; raw results in `{source}`" if source else "") + ".\n\n")
    out += "| section | measurement | value | ratio | target |\n|---|---|---|---|---|\n"
    for r in run["rows"]:
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        out += f"| {r['section']} | {r['measurement']} | {r['value']:,.3f} {r['unit']} | {ratio} | {r['target'] or ''} |\n"
    return out


def doc_table_span(text, path):
    """Where the table goes in `text`: the span between the marker lines."""
    if TABLE_BEGIN not in text or TABLE_END not in text:
        sys.exit(f"{path}: no table markers; it needs the lines\n{TABLE_BEGIN}\n{TABLE_END}")
    start = text.index(TABLE_BEGIN) + len(TABLE_BEGIN) + 1
    return start, text.index(TABLE_END, start)


def write_doc(path, run, source):
    """Replace the table of the Markdown file `path` with `run`'s."""
    text = open(path).read()
    start, end = doc_table_span(text, path)
    rel = os.path.abspath(source)
    if rel.startswith(ROOT + os.sep):
        rel = os.path.relpath(rel, ROOT)
    with open(path, "w") as f:
        f.write(text[:start] + table_md(run, rel) + text[end:])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
