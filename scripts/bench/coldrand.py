#!/usr/bin/env python3
"""Cold random 4 KiB reads, alone: where the time of one goes.

    .venv/bin/python scripts/bench/coldrand.py [--size 256M] [--rounds 6] [--reads 200]
        [--codec lz4|zstd|both] [--warm] [--gap S] [--floor] [--disk]
        [--bin B/bloscfs [--bin-a A/bloscfs] [--pair]] [--wrap 'strace -f -T -o /tmp/s.txt']

Makes lz4-5 and zstd-1 + shuffle float64 series the way bench.py does (python-blosc2
frames, 8 MiB chunks; in $BENCH_DIR/coldrand, default /tmp/bloscfs-bench/coldrand),
then runs rounds of: a fresh mount reading `--reads` random 4 KiB preads cold, and
python-blosc2 get_slice at the same offsets cold (page cache dropped before each;
which side goes first alternates). Prints each round's p50s and the median of the
per-round ratios (ours/theirs: below 1 favours bloscfs), and the daemon's counters.
`--bin` adds a second daemon build (`--bin-a`: the first, default this tree's), read
in the same rounds (A/B of two builds). `--gap S`: S seconds between reads.
`--pair` (with `--bin`): both builds mounted side by side, each offset read on both in
turn: the per-read ratio B/A, robust to a shared machine's drift.
`--wrap` runs the daemon under a tool (strace, valgrind) for one round of a few reads.
`--warm`: the source stays in the page cache (a fresh mount, its block cache empty:
the CPU side of a cold read, without the disk).
`--disk`: the disk alone, cold `O_DIRECT` and buffered preads of a block's stored size.
In-process decode times of the same blocks: scripts/bench/blockdecode (cargo run --release -p blockdecode).
`--floor`: the FUSE floor's cold random 4 KiB latency (an empty FUSE file system
answering from memory, scripts/bench/fusefloor) in the same rounds.
"""

import argparse
import os
import random
import shlex
import statistics
import subprocess
import sys
import time

import blosc2

import bench
from bench import MB, Floor, Mount, daemon_stats, drop_caches, latencies


def series(d, size):
    C, F = blosc2.Codec, blosc2.Filter
    return {name: bench.make_series(d, size, c, F.SHUFFLE, f"{name}-shuffle-{size >> 20}M")
            for name, c in [("lz4", C.LZ4), ("zstd", C.ZSTD)]}


class Wrapped(Mount):
    """A mount whose daemon runs under `wrap` (a command prefix)."""

    def __init__(self, src, mp, wrap, binary):
        self.mp = mp
        os.makedirs(mp, exist_ok=True)
        cmd = shlex.split(wrap) + [binary, "-f", "-o", "xattr", src, mp]
        self.p = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
        bench.wait_mounted(mp)


WARM = False  # --warm: the source stays in the page cache (CPU alone, no disk)
GAP = 0.0  # --gap: seconds between reads (the daemon's work after a reply done before the next)


def timed(op, args):
    """`latencies`, with GAP seconds (not timed) between the calls."""
    if not GAP:
        return latencies(op, args)
    out = []
    for x in args:
        time.sleep(GAP)
        out += latencies(op, [x])
    return out


def cold():
    if not WARM:
        drop_caches()


def ours(src, mp, name, offs, binary=None, wrap=None):
    """Cold 4 KiB preads at `offs` through a fresh mount: sorted latencies and counters."""
    cold()
    if wrap:
        m = Wrapped(src, mp, wrap, binary or bench.BIN)
    else:
        old = bench.BIN
        bench.BIN = binary or old
        try:
            m = Mount(src, mp)
        finally:
            bench.BIN = old
    try:
        fd = os.open(os.path.join(mp, name), os.O_RDONLY)
        lat = timed(lambda o: os.pread(fd, 4096, o), offs)
        os.close(fd)
        stats = daemon_stats(mp)
    finally:
        m.close()
    return sorted(lat), stats


def paired(src, d, name, offs, bin_a, bin_b, rounds):
    """Two builds mounted side by side, each offset read on both in turn (the
    order alternating), each round on fresh mounts: the median of the
    per-read ratios B/A of each round, and the rounds' p50s."""
    med = statistics.median
    out = []
    for r in range(rounds):
        cold()
        old = bench.BIN
        try:
            bench.BIN = bin_a
            ma = Mount(src, os.path.join(d, "mnt-a"))
            bench.BIN = bin_b
            mb = Mount(src, os.path.join(d, "mnt-b"))
        finally:
            bench.BIN = old
        try:
            fa = os.open(os.path.join(ma.mp, name), os.O_RDONLY)
            fb = os.open(os.path.join(mb.mp, name), os.O_RDONLY)
            la, lb = [], []
            for i, o in enumerate(offs[r]):
                if GAP:
                    time.sleep(GAP)
                first, second = ((fa, la), (fb, lb)) if (i + r) % 2 == 0 else ((fb, lb), (fa, la))
                for fd, lat in (first, second):
                    t = time.perf_counter()
                    os.pread(fd, 4096, o)
                    lat.append(time.perf_counter() - t)
            os.close(fa)
            os.close(fb)
        finally:
            ma.close()
            mb.close()
        ratio = med(b / a for a, b in zip(la, lb))
        out.append((med(la), med(lb), ratio))
        print(f"  round {r}: p50 A {med(la) * 1e6:.0f} us, B {med(lb) * 1e6:.0f} us, median B/A per read {ratio:.3f}",
              flush=True)
    return out


def theirs(path, offs):
    cold()
    s = blosc2.open(path)
    return sorted(timed(lambda o: s.get_slice(o // 8, o // 8 + 512), offs))


def floor(fmp, size, offs):
    cold()
    fl = Floor(fmp, size)
    try:
        fd = os.open(os.path.join(fmp, "data"), os.O_RDONLY)
        lat = latencies(lambda o: os.pread(fd, 4096, o), offs)
        os.close(fd)
    finally:
        fl.close()
    return sorted(lat)


def disk(path, reps=150):
    """Cold preads of the sizes a 4 KiB read of each series reads (a block's
    stored bytes), `O_DIRECT` and buffered: the disk's part, p50 in us."""
    import mmap
    size = os.path.getsize(path)
    for n in [4096, 176 << 10, 388 << 10]:
        for direct in [True, False]:
            drop_caches()
            fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
            buf = mmap.mmap(-1, n)
            rng = random.Random(n)
            lat = []
            for _ in range(reps):
                o = rng.randrange(0, size - n - 8192) // 4096 * 4096
                t = time.perf_counter()
                os.preadv(fd, [memoryview(buf)], o)
                lat.append(time.perf_counter() - t)
            os.close(fd)
            print(f"disk: {n >> 10} KiB {'O_DIRECT' if direct else 'buffered'}: p50 "
                  f"{statistics.median(lat) * 1e6:.0f} us")


def p50(v):
    return v[len(v) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="256M")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reads", type=int, default=200)
    ap.add_argument("--codec", default="both")
    ap.add_argument("--wrap")
    ap.add_argument("--bin", help="a second bloscfs binary, read in the same rounds (B)")
    ap.add_argument("--bin-a", help="the first binary (A; default target/release/bloscfs)")
    ap.add_argument("--floor", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warm", action="store_true",
                    help="keep the source in the page cache: a fresh mount's block cache is cold, the disk is not")
    ap.add_argument("--gap", type=float, default=0.0, help="seconds between reads (not timed)")
    ap.add_argument("--disk", action="store_true", help="only the disk's part: cold preads of a block's size")
    ap.add_argument("--pair", action="store_true",
                    help="A/B: --bin-a and --bin mounted side by side, each offset read on both in turn")
    a = ap.parse_args()
    global WARM, GAP
    WARM, GAP = a.warm, a.gap
    size = int(a.size[:-1]) * {"K": 1 << 10, "M": MB, "G": 1 << 30}[a.size[-1]]
    d = os.path.join(os.environ.get("BENCH_DIR", "/tmp/bloscfs-bench"), "coldrand")
    src, mp, fmp = os.path.join(d, "src"), os.path.join(d, "mnt"), os.path.join(d, "floor")
    os.makedirs(src, exist_ok=True)
    files = series(src, size)
    blosc2.set_nthreads(2)
    if a.disk:
        disk(files["lz4"])
        return
    rng = random.Random(a.seed)
    codecs = ["lz4", "zstd"] if a.codec == "both" else [a.codec]
    for c in codecs:
        p = files[c]
        name = os.path.basename(p)[: -len(".b2frame")]
        nbytes = blosc2.open(p).nbytes
        if a.warm:
            with open(p, "rb") as f:
                while f.read(8 * MB):
                    pass
        if a.pair:
            offs = [[rng.randrange(0, nbytes - 4096) // 8 * 8 for _ in range(a.reads)] for _ in range(a.rounds)]
            res = paired(src, d, name, offs, a.bin_a or bench.BIN, a.bin, a.rounds)
            rs = sorted(round(x[2], 3) for x in res)
            print(f"{c} paired B/A: median {statistics.median(rs):.3f} {rs}")
            continue
        if a.wrap:
            offs = [rng.randrange(0, nbytes - 4096) // 8 * 8 for _ in range(a.reads)]
            lat, st = ours(src, mp, name, offs, a.bin, a.wrap)
            print(f"{c} under {a.wrap!r}: p50 {p50(lat) * 1e6:.0f} us; {st}")
            continue
        theirs(p, [rng.randrange(0, nbytes - 4096) // 8 * 8 for _ in range(a.reads)])  # host cache
        res = {"A": [], "B": [], "ref": [], "floor": []}
        for r in range(a.rounds):
            offs = [rng.randrange(0, nbytes - 4096) // 8 * 8 for _ in range(a.reads)]
            sides = [("A", lambda: ours(src, mp, name, offs, a.bin_a)), ("ref", lambda: theirs(p, offs))]
            if a.bin:
                sides.append(("B", lambda: ours(src, mp, name, offs, a.bin)))
            if a.floor:
                sides.append(("floor", lambda: floor(fmp, nbytes, offs)))
            if r % 2:
                sides.reverse()
            for k, f in sides:
                out = f()
                lat = out[0] if isinstance(out, tuple) else out
                res[k].append(lat)
                if k == "A" and r == 0:
                    print(f"  {c} counters: {out[1]}")
            line = " ".join(f"{k} {p50(v[-1]) * 1e6:.0f}" for k, v in res.items() if v)
            print(f"  {c} round {r}: p50 us: {line}", flush=True)
        med = statistics.median
        for k in ["A", "B", "floor"]:
            if res[k]:
                ratios = sorted(round(p50(x) / p50(y), 2) for x, y in zip(res[k], res["ref"]))
                print(f"{c} {k}: p50 {med(p50(x) for x in res[k]) * 1e6:.0f} us vs get_slice "
                      f"{med(p50(x) for x in res['ref']) * 1e6:.0f} us; ratio {med(ratios):.2f} {ratios}")
        if res["B"]:
            ratios = sorted(round(p50(x) / p50(y), 3) for x, y in zip(res["B"], res["A"]))
            print(f"{c} B/A: {med(ratios):.3f} {ratios}")


if __name__ == "__main__":
    sys.exit(main())
