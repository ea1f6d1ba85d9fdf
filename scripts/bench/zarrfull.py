#!/usr/bin/env python3
"""The cold full read of a Zarr array's `.npy`, broken down.

    .venv/bin/python scripts/bench/zarrfull.py [--quick] [--rounds 3] [--base BLOSCFS]

Uses the stores `zarrbench.py` writes (8192x8192 float32, 1024x1024 chunks,
v2 Blosc lz4 and v3 zstd; 2048x2048 with --quick). Per store and round, page
cache dropped before each, the sides alternating:
  - floor: the same single big read (np.load's) from `fusefloor`, an empty
    FUSE file system answering from memory;
  - cat: `bloscfs cat ARRAY_DIR > /dev/null` (decoding without FUSE);
  - zarr-python: `zarr.open_array(...)[...]` in process, its CPU time / wall
    time (how many CPUs it keeps busy);
  - ours: `np.load` of the `.npy` through a fresh mount that has served another file
    (`bench.warm`) before the page cache is dropped, with the daemon's
    counters (blocks decoded, source bytes read) against what the store
    holds, the daemon's CPU seconds per thread name and the reader's own
    (the kernel's copies on its side of FUSE).
  - base (with --base): `ours` with another bloscfs binary (an older build).
Prints each round and the medians, and the ceiling
1 / (1 / floor rate + 1 / cat rate) against which both are also shown.
"""

import argparse
import collections
import os
import resource
import statistics
import subprocess
import time

import numpy as np
import zarr

import bench
import zarrbench
from bench import BIN, Floor, Mount, daemon_stats, drop_caches


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def threads_cpu(pid):
    """CPU seconds (user + system) per thread name of process `pid`."""
    tick = os.sysconf("SC_CLK_TCK")
    out = collections.Counter()
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                s = f.read()
        except OSError:
            continue
        name = s[s.index("(") + 1:s.rindex(")")]
        f = s[s.rindex(")") + 2:].split()
        out[name.rstrip("0123456789-")] += (int(f[11]) + int(f[12])) / tick
    return out


def floor(mp, size):
    fl = Floor(mp, size)
    try:
        p = os.path.join(mp, os.listdir(mp)[0])
        buf = bytearray(size)
        with open(p, "rb", buffering=0) as f:
            return timed(lambda: f.readinto(buf))
    finally:
        fl.close()


def cat(path):
    return timed(lambda: subprocess.run([BIN, "cat", path], stdout=subprocess.DEVNULL,
                                        check=True))


def theirs(path):
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = timed(lambda: zarr.open_array(path, mode="r")[...])
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return t, cpu


def ours(src, mp, npy, binary=None):
    if binary:
        bench.BIN = binary
    try:
        m = Mount(src, mp)
    finally:
        bench.BIN = BIN
    try:
        bench.warm(mp)  # the daemon's code in memory, as zarr-python's is in this process
        drop_caches()
        s0 = daemon_stats(mp)
        c0 = threads_cpu(m.p.pid)
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t = timed(lambda: np.load(npy))
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        s1 = daemon_stats(mp)
        c1 = threads_cpu(m.p.pid)
    finally:
        m.close()
    d = {k: s1[k] - s0.get(k, 0) for k in s1}
    cpu = c1 - c0
    cpu["reader (np.load)"] = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return t, d, cpu


def store_bytes(path):
    """Bytes of the chunk files under `path` (metadata files left out)."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
               if not f.startswith(".") and f != "zarr.json")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base", help="another bloscfs binary, measured as `base`")
    args = ap.parse_args()
    n = 2048 if args.quick else 8192
    top = os.path.join(os.environ.get("BENCH_DIR", "/tmp/bloscfs-bench"), "zarr")
    src = os.path.join(top, "src")
    os.makedirs(src, exist_ok=True)
    stores = zarrbench.make(src, n)
    bench.make_warm(src)
    mp = os.path.join(top, "mnt")
    size = n * n * 4
    mib = size / (1 << 20)
    print(f"# {n}x{n} float32 ({mib:.0f} MiB), chunks 1024x1024; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"zarr-python {zarr.__version__}, threading.max_workers="
          f"{zarr.config.get('threading.max_workers')}")
    for name, path in stores.items():
        npy = os.path.join(mp, os.path.basename(path)[:-5] + ".npy")
        res = collections.defaultdict(list)
        for r in range(args.rounds):
            sides = [("floor", lambda: floor(mp, size + 4096)), ("cat", lambda: cat(path)),
                     ("zarr", lambda: theirs(path)), ("ours", lambda: ours(src, mp, npy))]
            if args.base:
                sides.append(("base", lambda: ours(src, mp, npy, args.base)))
            if r % 2:
                sides.reverse()
            for side, fn in sides:
                drop_caches()
                res[side].append(fn())
            z, o = res["zarr"][-1], res["ours"][-1]
            print(f"{name} round {r}: floor {res['floor'][-1]:.3f}s cat {res['cat'][-1]:.3f}s "
                  f"zarr-python {z[0]:.3f}s ({z[1] / z[0]:.2f} CPUs) ours {o[0]:.3f}s"
                  + (f" base {res['base'][-1][0]:.3f}s" if args.base else ""))
        med = {k: statistics.median(x if k in ("floor", "cat") else [y[0] for y in x])
               for k, x in res.items()}
        rate = {k: mib / v for k, v in med.items()}
        ceil = 1 / (1 / rate["floor"] + 1 / rate["cat"])
        zcpu = statistics.median(z[1] / z[0] for z in res["zarr"])
        print(f"{name}: MiB/s floor {rate['floor']:.0f}, cat {rate['cat']:.0f}, "
              f"ceiling {ceil:.0f}, zarr-python {rate['zarr']:.0f} ({zcpu:.2f} CPUs), "
              f"ours {rate['ours']:.0f}" + (f", base {rate['base']:.0f}" if args.base else ""))
        print(f"{name}: zarr-python/ours {med['ours'] and med['zarr'] / med['ours']:.2f}x, "
              f"ours/ceiling {rate['ours'] / ceil:.2f}, zarr-python/ceiling "
              f"{rate['zarr'] / ceil:.2f}"
              + (f", base/ours {med['base'] / med['ours']:.2f}x" if args.base else ""))
        wanted = ("blocks_decoded", "cache_hits", "cache_misses", "source_bytes_read",
                  "bytes_served", "zarr_chunks_decoded")
        print(f"{name}: store holds {store_bytes(path)} B in {(n // 1024) ** 2} chunks")
        for side in ("ours", "base") if args.base else ("ours",):
            _, d, cpu = res[side][-1]
            print(f"{name}: {side} (last round) "
                  + " ".join(f"{k}={d[k]}" for k in wanted if k in d))
            print(f"{name}: {side} CPU s by thread (daemon) and of the reader: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in cpu.most_common() if v > 0))


if __name__ == "__main__":
    bench.sh("true")
    main()
