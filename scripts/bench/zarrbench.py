#!/usr/bin/env python3
"""Zarr arrays through the mount against zarr-python and tensorstore, locally and over S3.

    .venv/bin/python scripts/bench/zarrbench.py [--quick] [--rounds 3] [--reads 64]
                                                [--rows local,s3] [--install]

Writes a float32 array with 1024x1024 chunks twice with zarr-python 3 (in
$BENCH_DIR/zarr, default /tmp/bloscfs-bench/zarr): Zarr v2 with numcodecs Blosc
lz4 (zarr-python 2's default) and v3 with zstd (zarr-python 3's default);
256 MiB each (8192x8192), 16 MiB with --quick. Smooth values (a ramp plus
noise) so both compress as real data does. Then, per round, cold (page cache
dropped before each side, a fresh mount, a fresh store or tensorstore context;
the order of the sides alternates):
  - full: `np.load` of the `.npy` through the mount vs `zarr.open(...)[...]`
    vs tensorstore's `read()` of the whole array;
  - rand: `--reads` random 4 KiB preads of the `.npy` vs zarr-python reading
    the one chunk that holds each (`a[r0:r0+1024, c0:c0+1024]`) vs tensorstore
    reading the same 1024 elements (`t[row, c0:c0+1024]`).
The first round checks that every side read the same values.
Prints each round's times and the median ratios (the other side's time over
bloscfs's: above 1 favours bloscfs).

--rows s3 (scripts/bench/zarrs3.py) does the same with both stores in a bucket
of a moto server on 127.0.0.1: bloscfs mounting `s3://`, zarr-python reading
through obstore (`zarr.storage.ObjectStore`) and tensorstore's `s3` driver, with
the requests each side costs, counted in moto's access log.

tensorstore and obstore are not in .venv: without them their columns are left
out, with a note. --install puts them (scripts/bench/zarr-requirements.txt)
into $BENCH_DIR/pylib, which is used only by this script.
"""

import argparse
import os
import random
import statistics
import subprocess
import sys
import time

import numpy as np
import zarr

import bench
from bench import Mount, drop_caches

CH = 1024
HDR = 4096  # the .npy header: one page (the data starts on a page)
TOP = os.environ.get("BENCH_DIR", "/tmp/bloscfs-bench")
PYLIB = os.path.join(TOP, "pylib")
REQS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zarr-requirements.txt")


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


def optional(install):
    """The bench-only modules (tensorstore, obstore) found, by name; None for a missing one.
    `install`: pip installs them into PYLIB first (without their dependencies: numpy
    stays .venv's, as PYLIB comes last on the path)."""
    if install:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--no-deps", "--upgrade", "--target", PYLIB, "-r", REQS], check=True)
    sys.path.append(PYLIB)
    found = {}
    for name in ("tensorstore", "obstore"):
        try:
            found[name] = __import__(name)
        except ImportError:
            found[name] = None
            col = "tensorstore's column is" if name == "tensorstore" else "zarr-python's S3 column is"
            print(f"# no {name}: {col} left out (--install puts "
                  f"{os.path.relpath(REQS, bench.ROOT)} into {PYLIB})")
    return found


class Side:
    """One contender: `full()` reads the whole array (its values back), `rand(offs, count)`
    reads the elements at each `.npy` offset of `offs` (seconds, requests per read)."""

    def __init__(self, name, full, rand):
        self.name, self.full, self.rand = name, full, rand


def each(reads, count):
    """Runs the callables `reads` in turn: their total time and, with `count` (the
    server's request counter), the requests each cost."""
    t, per = 0.0, []
    for r in reads:
        c0 = count() if count else 0
        t0 = time.perf_counter()
        r()
        t += time.perf_counter() - t0
        if count:
            per.append(count() - c0)
    return t, per


def timed(fn):
    t = time.perf_counter()
    v = fn()
    return time.perf_counter() - t, v


def element(o, n):
    """The row and first column of the 1024 elements at `.npy` offset `o`."""
    e = (o - HDR) // 4
    return e // n, e % n


def touched(o, n):
    """The chunks under the pages the kernel asks bloscfs for to answer a 4 KiB pread at `o`."""
    b0 = max(o // 4096 * 4096, HDR)
    b1 = min((o + 4095) // 4096 * 4096 + 4096, HDR + n * n * 4)
    return {(e // n // CH, e % n // CH) for e in range((b0 - HDR) // 4, (b1 - HDR) // 4, 32)}


def by_cold_chunks(offs, per, n):
    """Requests per read of `per` by how many chunks under its pages no earlier read
    of `offs` touched: {cold chunks: [requests, ...]}."""
    seen, out = set(), {}
    for o, k in zip(offs, per):
        t = touched(o, n)
        out.setdefault(len(t - seen), []).append(k)
        seen |= t
    return out


def ours(mount, npy):
    def full():
        m = mount()
        try:
            return timed(lambda: np.load(npy))
        finally:
            m.close()

    def rand(offs, count):
        m = mount()
        try:
            fd = os.open(npy, os.O_RDONLY)
            try:
                return each([lambda o=o: os.pread(fd, 4096, o) for o in offs], count)
            finally:
                os.close(fd)
        finally:
            m.close()

    return Side("bloscfs", full, rand)


def zarr_python(open_array, n):
    """zarr-python; `open_array()` opens the array afresh."""
    def rand(offs, count):
        a = open_array()
        chunks = [element(o, n) for o in offs]
        return each([lambda r=r, c=c: a[r // CH * CH:r // CH * CH + CH, c // CH * CH:c // CH * CH + CH]
                     for r, c in chunks], count)

    return Side("zarr-python", lambda: timed(lambda: open_array()[...]), rand)


def tensorstore(ts, spec, n):
    """tensorstore on `spec`, opened with a context of its own (nothing cached)."""
    def opened():
        return ts.open(spec, read=True, context=ts.Context()).result()

    def rand(offs, count):
        t = opened()
        return each([lambda r=r, c=c: t[r, c:c + CH].read().result()
                     for r, c in (element(o, n) for o in offs)], count)

    return Side("tensorstore", lambda: timed(lambda: opened().read().result()), rand)


def ts_spec(path, v3, kvstore=None):
    return {"driver": "zarr3" if v3 else "zarr",
            "kvstore": kvstore or {"driver": "file", "path": path + "/"}}


def measure(label, sides, n, args, count=None):
    """`args.rounds` rounds of every side of `sides` (bloscfs first), cold, the order
    alternating; prints each round and the median ratios; with `count`, the requests."""
    ratios = {s.name: {"full": [], "rand": []} for s in sides[1:]}
    reqs = {s.name: {"full": [], "rand": []} for s in sides}
    cold_reqs = {}  # bloscfs's requests per read, by cold chunks under its pages
    for r in range(args.rounds):
        rng = random.Random(r)
        offs = [HDR + rng.randrange(0, n * n * 4 - 4096) // 4096 * 4096 for _ in range(args.reads)]
        for kind in ("full", "rand"):
            got, first = {}, None
            for s in sides if r % 2 == 0 else sides[::-1]:
                drop_caches()
                c0 = count() if count else 0
                if kind == "full":
                    got[s.name], values = s.full()
                    if r == 0:  # every side read the same values
                        if first is not None and not np.array_equal(values, first):
                            raise SystemExit(f"{label}: {s.name} read other values")
                        first = values
                    del values
                    if count:
                        reqs[s.name]["full"].append(count() - c0)
                else:
                    got[s.name], per = s.rand(offs, count)
                    if s is sides[0] and count:
                        for cold, ks in by_cold_chunks(offs, per, n).items():
                            cold_reqs.setdefault(cold, []).extend(ks)
                    reqs[s.name]["rand"].extend(per)
            base = got[sides[0].name]
            for s in sides[1:]:
                ratios[s.name][kind].append(got[s.name] / base)
            print(f"{label} round {r}: {kind:4} " + " ".join(f"{s.name} {got[s.name]:.3f}s" for s in sides))
    for s in sides[1:]:
        what = "one chunk each" if s.name == "zarr-python" else "the same elements"
        print(f"{label}: cold full read, {s.name}/bloscfs {statistics.median(ratios[s.name]['full']):.2f}x; "
              f"cold random 4 KiB ({args.reads} reads) vs {what}: "
              f"{statistics.median(ratios[s.name]['rand']):.2f}x")
    if count:
        for s in sides:
            per = reqs[s.name]["rand"]
            hist = ", ".join(f"{k} ({per.count(k)})" for k in sorted(set(per)))
            print(f"{label}: requests, {s.name}: full read {'/'.join(map(str, reqs[s.name]['full']))}; "
                  f"per random read: {hist} (requests (reads)); {sum(per) / args.rounds:.0f} "
                  f"per round of {args.reads} reads")
        for cold in sorted(cold_reqs):
            ks = cold_reqs[cold]
            hist = ", ".join(f"{k} ({ks.count(k)})" for k in sorted(set(ks)))
            print(f"{label}: requests, bloscfs, reads whose pages touch {cold} chunks no earlier "
                  f"read of the round touched: {hist}")
    sys.stdout.flush()


def local_rows(stores, top, n, args, mods):
    mp = os.path.join(top, "mnt")
    src = os.path.dirname(next(iter(stores.values())))
    for name, path in stores.items():
        npy = os.path.join(mp, os.path.basename(path)[:-5] + ".npy")
        sides = [ours(lambda: Mount(src, mp), npy),
                 zarr_python(lambda path=path: zarr.open_array(path, mode="r"), n)]
        if mods["tensorstore"]:
            sides.append(tensorstore(mods["tensorstore"], ts_spec(path, name.startswith("v3")), n))
        measure(name, sides, n, args)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reads", type=int, default=64)
    ap.add_argument("--rows", default="local,s3", help="local, s3 or both (comma-separated)")
    ap.add_argument("--install", action="store_true",
                    help="pip install tensorstore and obstore into $BENCH_DIR/pylib first")
    args = ap.parse_args()
    rows = set(args.rows.split(","))
    n = 2048 if args.quick else 8192
    top = os.path.join(TOP, "zarr")
    src = os.path.join(top, "src")
    os.makedirs(src, exist_ok=True)
    mods = optional(args.install)
    stores = make(src, n)
    print(f"# {n}x{n} float32 ({n * n * 4 >> 20} MiB), chunks {CH}x{CH}; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if "local" in rows:
        local_rows(stores, top, n, args, mods)
    if "s3" in rows:
        import zarrs3

        zarrs3.rows(stores, top, n, args, mods)
    print(f"# load {os.getloadavg()[0]:.1f} at the end")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
