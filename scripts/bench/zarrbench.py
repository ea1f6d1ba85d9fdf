#!/usr/bin/env python3
"""Zarr arrays through the mount against zarr-python in process (local source).

    .venv/bin/python scripts/bench/zarrbench.py [--quick] [--rounds 3] [--reads 64]

Writes a float32 array with 1024x1024 chunks twice with zarr-python 3 (in
$BENCH_DIR/zarr, default /tmp/bloscfs-bench/zarr): Zarr v2 with numcodecs Blosc
lz4 (zarr-python 2's default) and v3 with zstd (zarr-python 3's default);
256 MiB each (8192x8192), 16 MiB with --quick. Smooth values (a ramp plus
noise) so both compress as real data does. Then, per round, cold (page cache
dropped, a fresh mount; which side goes first alternates):
  - full: `np.load` of the `.npy` through the mount vs `zarr.open(...)[...]`;
  - rand: `--reads` random 4 KiB preads of the `.npy` vs zarr-python reading
    the one chunk that holds each (`a[r0:r0+1024, c0:c0+1024]`).
Prints each round's times and the median ratio (zarr-python / bloscfs: above 1
favours bloscfs). S3 rows and tensorstore are not part of this script.
"""

import argparse
import os
import random
import statistics
import sys
import time

import numpy as np
import zarr

import bench
from bench import Mount, drop_caches

CH = 1024


def make(d, n):
    from numcodecs import Blosc

    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 100, n * n, dtype="f4").reshape(n, n)
    data = ramp + rng.normal(0, 0.01, (n, n)).astype("f4")
    out = {}
    for name, kw in [
        ("v2lz4", dict(zarr_format=2, compressors=Blosc(cname="lz4", clevel=5,
                                                         shuffle=Blosc.SHUFFLE))),
        ("v3zstd", dict(zarr_format=3)),
    ]:
        p = os.path.join(d, f"{name}-{n}.zarr")
        if not os.path.exists(p):
            a = zarr.create_array(p, shape=(n, n), chunks=(CH, CH), dtype="f4", **kw)
            a[...] = data
        out[name] = p
    return out


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reads", type=int, default=64)
    args = ap.parse_args()
    n = 2048 if args.quick else 8192
    top = os.path.join(os.environ.get("BENCH_DIR", "/tmp/bloscfs-bench"), "zarr")
    src = os.path.join(top, "src")
    os.makedirs(src, exist_ok=True)
    stores = make(src, n)
    mp = os.path.join(top, "mnt")
    print(f"# {n}x{n} float32 ({n * n * 4 >> 20} MiB), chunks {CH}x{CH}; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, path in stores.items():
        npy = os.path.join(mp, os.path.basename(path)[:-5] + ".npy")
        full, rand = [], []
        for r in range(args.rounds):
            rng = random.Random(r)
            hdr = 128
            offs = [hdr + rng.randrange(0, n * n * 4 - 4096) // 4096 * 4096
                    for _ in range(args.reads)]

            def ours_full():
                m = Mount(src, mp)
                try:
                    return timed(lambda: np.load(npy))
                finally:
                    m.close()

            def ours_rand():
                m = Mount(src, mp)
                try:
                    fd = os.open(npy, os.O_RDONLY)
                    t = timed(lambda: [os.pread(fd, 4096, o) for o in offs])
                    os.close(fd)
                    return t
                finally:
                    m.close()

            def theirs_full():
                return timed(lambda: zarr.open_array(path, mode="r")[...])

            def theirs_rand():
                a = zarr.open_array(path, mode="r")

                def go():
                    for o in offs:
                        e = (o - hdr) // 4
                        r0, c0 = e // n // CH * CH, e % n // CH * CH
                        a[r0:r0 + CH, c0:c0 + CH]
                return timed(go)

            pairs = [(ours_full, theirs_full, full), (ours_rand, theirs_rand, rand)]
            for ours, theirs, acc in pairs:
                order = [ours, theirs] if r % 2 == 0 else [theirs, ours]
                got = {}
                for fn in order:
                    drop_caches()
                    got[fn] = fn()
                acc.append(got[theirs] / got[ours])
                print(f"{name} round {r}: {fn.__name__.split('_')[1]:4} "
                      f"bloscfs {got[ours]:.3f}s zarr-python {got[theirs]:.3f}s")
        print(f"{name}: cold full read, zarr-python/bloscfs "
              f"{statistics.median(full):.2f}x; cold random 4 KiB "
              f"({args.reads} reads) vs one chunk each: {statistics.median(rand):.2f}x")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
