#!/usr/bin/env python3
"""One cold row of a 2-D array, one cold plane of a 3-D array: where the time goes.

    .venv/bin/python scripts/bench/coldrows.py [--rounds 7] [--readahead 1M,128K] [--arrays r8,r4,p4,p8] [--scans]
        [--before OTHER_BLOSCFS]

Makes 256 MiB arrays with python-blosc2's default chunks and blocks (linspace values, as
bench.py's b2nd rows; in $BENCH_DIR/coldrows, default /tmp/bloscfs-bench/coldrows):
r8 float64 4096x8192, r4 float32 8192x8192, p4 float32 256x512x512, p8 float64 128x512x512.
For each array and each `-o readahead` value, rounds of (page cache dropped before each
side, which side goes first alternating):
  - ours: a fresh mount that has served another file (`warm/w.b2nd`, bench.warm),
    so that its code is in memory as python-blosc2's library is in this process; then the
    page cache dropped, open the `.npy` and read its header (Python's buffered reads, as
    np.load does), then np.memmap of the data and a copy of the middle row or plane;
    `--fresh-daemon`: measured right after the mount appears instead (the daemon's start,
    its code read from disk, counted in the header part);
  - theirs: python-blosc2 open, then the same slice;
  - floor: the same reads of a file of the same size on an empty FUSE fs answering from
    memory (scripts/bench/fusefloor): what the kernel's requests cost without decoding.
Then one more ours with the daemon's debug log: the READ requests the kernel sent (offset,
size), the blocks those requests intersect, the blocks the row or plane intersects, and the
blocks decoded (`user.bloscfs.stats`), after the header and after the row.
Prints medians and ratios (ours/theirs: below 1 favours bloscfs).
`--before BIN`: another build of bloscfs measured as one more side of the same rounds
(`prev`), with its own counts: a change compared side by side.
`--rand`: instead, cold random 4 KiB reads of each `.npy` (preads at offsets aligned in the
data, a fresh mount per round) against python-blosc2 reading the same elements (one open,
then a slice per read), both cold, p50 per round: the median of the per-round ratios; and
the same reads with the reader and the daemon on one CPU (`pinned`).
`--scans`: instead, cold full scans of each array's `.npy` (np.load, and np.load(mmap_mode="r")
+ copy) against the ceiling 1/(1/FUSE floor + 1/`bloscfs cat` rate), all in the same run.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import blosc2
import numpy as np

import bench
from bench import MB, Floor, daemon_stats, drop_caches, wait_mounted

ARRAYS = {
    "r8": ((4096, 8192), "f8"),
    "r4": ((8192, 8192), "f4"),
    "p4": ((256, 512, 512), "f4"),
    "p8": ((128, 512, 512), "f8"),
}


def make(d, name):
    p = os.path.join(d, name + ".b2nd")
    if not os.path.exists(p):
        shape, dt = ARRAYS[name]
        n = int(np.prod(shape))
        blosc2.asarray(np.linspace(0, 1, n, dtype=dt).reshape(shape), urlpath=p, mode="w")
    return p


class Daemon:
    """A fresh mount of `src` with options `opts`, its debug log in `log` if given."""

    def __init__(self, src, mp, opts, log=None, binary=None):
        self.mp = mp
        os.makedirs(mp, exist_ok=True)
        cmd = [binary or bench.BIN, "-f", "-o", ",".join(["xattr"] + opts)]
        if log:
            cmd += ["-d", "-o", "logfile=" + log]
        self.p = subprocess.Popen(cmd + [src, mp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_mounted(mp)

    def close(self):
        # Retried: the release of a file just closed may still be on its way.
        while subprocess.run(["fusermount3", "-u", self.mp], stderr=subprocess.DEVNULL).returncode:
            time.sleep(0.05)
        self.p.wait()


def header_len(path):
    """Open `path`, read its `.npy` header as np.load does: (header bytes, shape, dtype)."""
    with open(path, "rb") as f:
        v = np.lib.format.read_magic(f)
        rd = np.lib.format.read_array_header_1_0 if v == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dt = rd(f)
        return f.tell(), shape, dt


def middle(path, hdr, shape, dt):
    """The middle row or plane of the array at `path` (data after `hdr` bytes), copied."""
    mm = np.memmap(path, dtype=dt, mode="r", offset=hdr, shape=shape)
    x = np.array(mm[shape[0] // 2])
    del mm
    return x


FRESH = False  # --fresh-daemon


def ready(src, mp, opts, log=None, binary=None):
    """A fresh mount, warmed (unless --fresh-daemon), with the page cache dropped."""
    if FRESH:
        drop_caches()
        return Daemon(src, mp, opts, log, binary)
    m = Daemon(src, mp, opts, log, binary)
    bench.warm(mp)
    drop_caches()
    return m


def ours(src, mp, name, opts, binary=None):
    m = ready(src, mp, opts, binary=binary)
    path = os.path.join(mp, name + ".npy")
    t0 = time.perf_counter()
    hdr, shape, dt = header_len(path)
    t1 = time.perf_counter()
    x = middle(path, hdr, shape, dt)
    t2 = time.perf_counter()
    m.close()
    return t1 - t0, t2 - t1, x


def theirs(src, name):
    drop_caches()
    t0 = time.perf_counter()
    a = blosc2.open(os.path.join(src, name + ".b2nd"))
    t1 = time.perf_counter()
    x = a[a.shape[0] // 2]
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, x


def floor(fmp, hdr, shape, dt):
    drop_caches()
    path = os.path.join(fmp, os.listdir(fmp)[0])
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        f.read(8)
    t1 = time.perf_counter()
    middle(path, hdr, shape, dt)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


READ = re.compile(r"debug: read\(\d+, fh (\d+), (\d+), (\d+)\)")


def counts(src, mp, name, opts, d, binary=None):
    """Requests and blocks of one cold read of the middle row or plane, from the debug log."""
    log = os.path.join(d, "coldrows.log")
    if os.path.exists(log):
        os.unlink(log)
    m = ready(src, mp, opts, log, binary)
    start = os.path.getsize(log)  # what the warm-up logged is not counted
    path = os.path.join(mp, name + ".npy")
    b0 = daemon_stats(mp)["blocks_decoded"]
    hdr, shape, dt = header_len(path)
    b1 = daemon_stats(mp)["blocks_decoded"]
    middle(path, hdr, shape, dt)
    b2 = daemon_stats(mp)["blocks_decoded"]
    m.close()
    text = open(log, "rb").read()[start:].decode(errors="replace")
    reqs = [tuple(int(g) for g in r.groups()) for r in READ.finditer(text)]
    a = blosc2.open(os.path.join(src, name + ".b2nd"))
    blk = int(np.prod(a.blocks)) * a.dtype.itemsize
    per_chunk = int(np.prod(a.chunks)) // int(np.prod(a.blocks))

    def blocks_of(lo, hi):
        """Blocks of the raw content holding C-order bytes lo..hi (rows of whole blocks)."""
        # Default blocks span whole rows of a chunk (r8, r4) or whole planes of a chunk
        # slab; the .npy's C order then meets blocks in raw order chunk by chunk.
        out = set()
        row = int(np.prod(shape[1:])) * dt.itemsize
        brow = int(np.prod(a.blocks[1:])) * dt.itemsize
        for r in range(lo // row, (hi - 1) // row + 1):
            a0, a1 = max(lo, r * row), min(hi, (r + 1) * row)
            for k in range((a0 - r * row) // brow, (a1 - r * row - 1) // brow + 1):
                off = k * brow
                idx = np.unravel_index((r * row + off) // dt.itemsize, shape)
                cidx = tuple(i // c for i, c in zip(idx, a.chunks))
                bidx = tuple((i % c) // b for i, c, b in zip(idx, a.chunks, a.blocks))
                out.add((cidx, bidx))
        return out

    seen = set()
    for _, off, size in reqs:
        lo, hi = max(off, hdr) - hdr, min(off + size, hdr + int(np.prod(shape)) * dt.itemsize) - hdr
        if hi > lo:
            seen |= blocks_of(lo, hi)
    plane = int(np.prod(shape[1:])) * dt.itemsize
    mid = shape[0] // 2
    need = blocks_of(mid * plane, (mid + 1) * plane)
    return {
        "requests": reqs,
        "header_blocks": b1 - b0,
        "row_blocks": b2 - b1,
        "blocks_requested": len(seen),
        "blocks_needed": len(need),
        "block_bytes": blk,
        "blocks_per_chunk": per_chunk,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--readahead", default="1M")
    ap.add_argument("--arrays", default="r8,r4,p4,p8")
    ap.add_argument("--scans", action="store_true", help="the full scans vs the ceiling instead")
    ap.add_argument("--rand", action="store_true", help="cold random 4 KiB reads instead")
    ap.add_argument("--reads", type=int, default=100, help="reads per round of --rand")
    ap.add_argument("--before", help="another bloscfs binary, measured side by side as `prev`")
    ap.add_argument("--alt", help="with --rand: mount options (-o) of one more side, `alt`")
    ap.add_argument("--fresh-daemon", action="store_true",
                    help="measure each mount right after it appears, its start included")
    a = ap.parse_args()
    global FRESH
    FRESH = a.fresh_daemon
    d = os.path.join(os.environ.get("BENCH_DIR", "/tmp/bloscfs-bench"), "coldrows")
    src = os.path.join(d, "src")
    os.makedirs(src, exist_ok=True)
    mp = os.path.join(d, "mnt")
    fmp = os.path.join(d, "floor")
    names = a.arrays.split(",")
    for n in names:
        make(src, n)
    bench.make_warm(src)
    if a.rand:
        return rand(src, mp, names, a.rounds, a.reads, a.before, a.alt)
    if a.scans:
        return scans(src, mp, fmp, names, a.rounds, a.before)
    print(f"{'array':5} {'readahead':9} | {'ours ms':>8} {'hdr':>6} | {'blosc2 ms':>9} {'open':>6} | "
          f"{'floor ms':>8} | {'ours/blosc2':>11} {'floor/blosc2':>12} | requests (KiB) | blocks: decoded "
          f"hdr+row / requested / row needs")
    for n in names:
        for ra in a.readahead.split(","):
            opts = [f"readahead={ra}"]
            m = Daemon(src, mp, opts)
            hdr, shp, dt = header_len(os.path.join(mp, n + ".npy"))
            size = os.path.getsize(os.path.join(mp, n + ".npy"))
            m.close()
            fl = Floor(fmp, size)
            bench.set_readahead(fmp)  # Floor sets 1 MiB; the same value as ours
            set_bdi(fmp, ra)
            t = {"ours": [], "theirs": [], "floor": []}
            sides = ["ours", "theirs", "floor"]
            if a.before:
                t["prev"] = []
                sides.insert(1, "prev")
            for k in range(a.rounds):
                for s in (sides if k % 2 == 0 else sides[::-1]):
                    if s == "ours":
                        h, r, x = ours(src, mp, n, opts)
                        t[s].append((h, r))
                    elif s == "prev":
                        h, r, _ = ours(src, mp, n, opts, a.before)
                        t[s].append((h, r))
                    elif s == "theirs":
                        h, r, y = theirs(src, n)
                        t[s].append((h, r))
                    else:
                        t[s].append(floor(fmp, hdr, shp, dt))
                assert (x == y).all()
            fl.close()
            c = counts(src, mp, n, opts, d)
            med = {s: (statistics.median(h + r for h, r in v), statistics.median(h for h, _ in v))
                   for s, v in t.items()}
            rq = " ".join(f"{o >> 10}+{s >> 10}" for _, o, s in c["requests"])
            print(f"{n:5} {ra:9} | {med['ours'][0] * 1e3:8.2f} {med['ours'][1] * 1e3:6.2f} | "
                  f"{med['theirs'][0] * 1e3:9.2f} {med['theirs'][1] * 1e3:6.2f} | {med['floor'][0] * 1e3:8.2f} | "
                  f"{med['ours'][0] / med['theirs'][0]:11.2f} {med['floor'][0] / med['theirs'][0]:12.2f} | {rq} | "
                  f"{c['header_blocks']}+{c['row_blocks']} / {c['blocks_requested']} / {c['blocks_needed']}")
            if a.before:
                c = counts(src, mp, n, opts, d, a.before)
                rq = " ".join(f"{o >> 10}+{s >> 10}" for _, o, s in c["requests"])
                print(f"{'prev':15} | {med['prev'][0] * 1e3:8.2f} {med['prev'][1] * 1e3:6.2f} | "
                      f"ours/prev {med['ours'][0] / med['prev'][0]:.2f}, prev/blosc2 "
                      f"{med['prev'][0] / med['theirs'][0]:.2f} | {rq} | "
                      f"{c['header_blocks']}+{c['row_blocks']} / {c['blocks_requested']} / {c['blocks_needed']}")
            sys.stdout.flush()


def scans(src, mp, fmp, names, rounds, before=None):
    """Full cold scans of each `.npy` (np.load; np.load(mmap_mode="r") + copy) against the
    ceiling 1/(1/FUSE floor + 1/bloscfs cat): the floor the same reader (np.fromfile; a
    memmap copied) on a file of the same size on the empty FUSE fs, `cat` decoding the
    source from the page cache."""
    print(f"{'array':5} | {'np.load GB/s':>12} {'mmap+copy':>9} | {'floor':>5} {'mmap':>5} {'cat':>5} | "
          f"{'load/ceiling':>12} {'mmap/ceiling':>12}")
    for n in names:
        t = {"load": [], "mmap": [], "fload": [], "fmmap": [], "cat": []}
        m = Daemon(src, mp, [])
        size = os.path.getsize(os.path.join(mp, n + ".npy"))
        m.close()
        b2 = os.path.join(src, n + ".b2nd")
        if before:
            t.update({"pload": [], "pmmap": []})
        for k in range(rounds):
            for how in ("load", "mmap"):
                for side, binary in [("", None)] + ([("p", before)] if before else []):
                    drop_caches()
                    m = Daemon(src, mp, [], binary=binary)
                    t[side + how].append(scan(os.path.join(mp, n + ".npy"), how, np.load))
                    m.close()
                fl = Floor(fmp, size)
                drop_caches()
                t["f" + how].append(scan(os.path.join(fmp, os.listdir(fmp)[0]), how, raw))
                fl.close()
            subprocess.run([bench.BIN, "cat", b2], stdout=subprocess.DEVNULL, check=True)  # source warm
            t0 = time.perf_counter()
            subprocess.run([bench.BIN, "cat", b2], stdout=subprocess.DEVNULL, check=True)
            t["cat"].append(time.perf_counter() - t0)
        r = {k: size / statistics.median(v) / 1e9 for k, v in t.items()}
        ceil = {h: 1 / (1 / r["f" + h] + 1 / r["cat"]) for h in ("load", "mmap")}
        print(f"{n:5} | {r['load']:12.2f} {r['mmap']:9.2f} | {r['fload']:5.2f} {r['fmmap']:5.2f} {r['cat']:5.2f} | "
              f"{r['load'] / ceil['load']:12.2f} {r['mmap'] / ceil['mmap']:12.2f}")
        if before:
            print(f"{'prev':5} | {r['pload']:12.2f} {r['pmmap']:9.2f} | ours/prev GB/s: load "
                  f"{r['load'] / r['pload']:.2f}, mmap {r['mmap'] / r['pmmap']:.2f}")
        sys.stdout.flush()


def rand(src, mp, names, rounds, reads, before=None, alt=None):
    """Cold random 4 KiB reads of each `.npy` vs python-blosc2 reading the same elements; and
    ours again with the reader and all the daemon's threads on CPU 0 (`pinned`): each request
    and its reply then wake a thread on the CPU that is going idle, not on an idle one.
    `before` (a binary) and `alt` (mount options) add a side each, `prev` and `alt`."""
    others = ([("prev", [], before)] if before else []) + ([("alt", [alt], None)] if alt else [])
    print(f"{'array':5} | {'ours p50 us':>11} {'blosc2 p50 us':>13} | ours/blosc2 (median of rounds) | "
          f"per round | pinned p50 us, pinned/blosc2"
          + "".join(f" | {o} p50 us, {o}/blosc2" for o, _, _ in others))
    allcpus = os.sched_getaffinity(0)
    for n in names:
        m = Daemon(src, mp, [])
        path = os.path.join(mp, n + ".npy")
        hdr, shape, dt = header_len(path)
        m.close()
        per = 4096 // dt.itemsize
        total = int(np.prod(shape))
        rng = np.random.default_rng(7)
        ratios, p50s, pinned = [], [], []
        other = {o: [] for o, _, _ in others}
        for k in range(rounds):
            at = [int(x) * per for x in rng.integers(0, total // per, reads)]
            t = {}
            sides = ("ours", "theirs", "pinned") + tuple(o for o, _, _ in others)
            for side in (sides if k % 2 == 0 else sides[::-1]):
                lat = []
                if side != "theirs":
                    opts, binary = next(((o, b) for name, o, b in others if name == side), ([], None))
                    m = ready(src, mp, opts, binary=binary)
                    if side == "pinned":
                        for tid in os.listdir(f"/proc/{m.p.pid}/task"):
                            os.sched_setaffinity(int(tid), {0})
                        os.sched_setaffinity(0, {0})
                    fd = os.open(path, os.O_RDONLY)
                    for e in at:
                        t0 = time.perf_counter()
                        os.pread(fd, 4096, hdr + e * dt.itemsize)
                        lat.append(time.perf_counter() - t0)
                    os.close(fd)
                    os.sched_setaffinity(0, allcpus)
                    m.close()
                else:
                    drop_caches()
                    a = blosc2.open(os.path.join(src, n + ".b2nd"))
                    for e in at:
                        sl = flat_slice(shape, e, per)
                        t0 = time.perf_counter()
                        a[sl]
                        lat.append(time.perf_counter() - t0)
                t[side] = statistics.median(lat)
            ratios.append(t["ours"] / t["theirs"])
            pinned.append(t["pinned"] / t["theirs"])
            for o in other:
                other[o].append((t[o], t[o] / t["theirs"]))
            p50s.append((t["ours"], t["theirs"], t["pinned"]))
        print(f"{n:5} | {statistics.median(o for o, _, _ in p50s) * 1e6:11.0f} "
              f"{statistics.median(b for _, b, _ in p50s) * 1e6:13.0f} | {statistics.median(ratios):.2f} | "
              f"{sorted(round(r, 2) for r in ratios)} | "
              f"{statistics.median(q for _, _, q in p50s) * 1e6:.0f}, {statistics.median(pinned):.2f}"
              + "".join(f" | {statistics.median(p for p, _ in v) * 1e6:.0f}, "
                        f"{statistics.median(r for _, r in v):.2f}" for v in other.values()))
        sys.stdout.flush()


def flat_slice(shape, e, n):
    """The slices holding the `n` C-order elements from `e` (whole trailing rows, or a part
    of one row; `e` a multiple of `n`)."""
    idx = np.unravel_index(e, shape)
    last = shape[-1]
    if n <= last:
        return tuple(int(i) for i in idx[:-1]) + (slice(int(idx[-1]), int(idx[-1]) + n),)
    rows = n // last
    return tuple(int(i) for i in idx[:-2]) + (slice(int(idx[-2]), int(idx[-2]) + rows), slice(None))


def raw(path, mmap_mode=None):
    """The FUSE floor's file as np.load would read it: whole, or mapped."""
    if mmap_mode:
        return np.memmap(path, dtype=np.uint8, mode="r")
    return np.fromfile(path, dtype=np.uint8)


def scan(path, how, load):
    """Seconds to read `path` whole: `load` of it, or mapped by `load` and copied."""
    t0 = time.perf_counter()
    if how == "load":
        load(path)
    else:
        mm = load(path, mmap_mode="r")
        np.array(mm)
        del mm
    return time.perf_counter() - t0


def set_bdi(mp, ra):
    """Set the read-ahead of the FUSE mount at `mp` to `ra` (e.g. 1M, 128K)."""
    kib = int(ra[:-1]) * (1024 if ra.endswith("M") else 1)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            p = line.split(" ")
            if p[4] == mp:
                with open(f"/sys/class/bdi/{p[2]}/read_ahead_kb", "w") as g:
                    g.write(str(kib))


if __name__ == "__main__":
    main()
