"""Concurrent random readers and the first cold read of a fresh mount, with and without
an added round trip: part of the remote section (scripts/bench/remote.py).

The array: ARRAY, a float64 b2nd array of 128 chunks (as many as a 1 GiB array of
8 MiB chunks) and 2,048 blocks (200 random reads touch few blocks
twice, as in a large array), at a size that keeps moto's GETs short: moto reads a whole
object for every ranged GET. At 0 ms every client talks to the server directly;
at DELAY_MS every client (the mount, python-blosc2's C2Array, the raw GETs) goes through
scripts/bench/delayproxy.py, which holds every piece of data DELAY_MS/2 in each
direction and a new connection's first bytes one more round trip (its handshake).
  - READS random 4 KiB reads (the same offsets for every side), from 1 and from 8
    threads (thread k makes reads k, k+T, ...): wall time, p50 and requests per read,
    fresh mount each round, the file opened before the clock; vs raw ranged GETs of
    4 KiB on one kept-alive connection per thread (opened before the clock), and on
    Caterva2 vs C2Array slices of the same elements (one C2Array shared by the threads,
    opened before the clock).
  - the first read of a fresh mount: stat, open and one 4 KiB pread of the `.npy`
    (requests until it returns, and until the unmount after it) vs C2Array's open and
    first slice vs one raw ranged GET on a new connection.
Requests are counted by the servers, as in the rest of the section.
"""

import os
import random
import statistics
import subprocess
import sys
import threading
import time
import http.client

import blosc2

import remote

MB = 1 << 20
ARRAY = ("rand.b2nd", 32 * MB, 256 << 10, 16 << 10)  # name, bytes, chunk and block bytes
DELAY_MS = 10
THREADS = (1, 8)
READS = 200
PROXY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "delayproxy.py")


class Proxy:
    """scripts/bench/delayproxy.py in front of 127.0.0.1:`target`, `delay_ms` added a round trip."""

    def __init__(self, target, delay_ms):
        self.p = subprocess.Popen([sys.executable, PROXY, "0", str(target), str(delay_ms)],
                                  stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("listening on "):
            self.close()
            raise RuntimeError(f"delayproxy.py to port {target} did not start")
        self.port = int(line.split()[-1])

    def close(self):
        self.p.terminate()
        self.p.wait()


class Side:
    """One backend as every client reaches it: directly, or through a proxy on `port`."""

    def __init__(self, c, be, port):
        old, new = f"127.0.0.1:{be.port}", f"127.0.0.1:{port}"
        name = ARRAY[0]
        key = be.key.replace("x.b2nd", name) if be.key else f"/api/fetch/{remote.C2_ROOT}/{name}"
        self.be = remote.Backend(be.name, be.src.replace(old, new), be.opts.replace(old, new), port, key,
                                 be.sign, be.count)
        self.c2base = c.c2base.replace(old, new)
        self.c2 = be is c.c2

    def c2array(self):
        return blosc2.C2Array(f"{remote.C2_ROOT}/{ARRAY[0]}", urlbase=self.c2base)


def settle(count):
    """The server's count once it stops moving: requests still in flight (a mount's
    background fetches, answers moto has not logged yet) land before the next side starts."""
    last = count()
    while True:
        time.sleep(0.05)
        now = count()
        if now == last:
            return now
        last = now


def threaded(read, offs, threads):
    """`read(k, o)` for every offset, thread k of `threads` taking offsets k, k+threads, ...:
    (wall seconds, latencies, results), the last two in the order of `offs`."""
    out, lat, errors = [None] * len(offs), [0.0] * len(offs), []

    def work(k):
        try:
            for i in range(k, len(offs), threads):
                t = time.perf_counter()
                out[i] = read(k, offs[i])
                lat[i] = time.perf_counter() - t
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return wall, lat, out


class Ctx:
    """The array's size and what a read at each offset must give."""

    def __init__(self, c):
        self.c, self.b = c, c.b
        local = os.path.join(os.path.dirname(c.local), ARRAY[0])
        self.x = blosc2.open(local)[:]
        self.nbytes = self.x.nbytes
        self.span = os.path.getsize(local) - 4096
        self.npy = os.path.join(c.mp, ARRAY[0][: -len(".b2nd")] + ".npy")
        self.what = (f"a {self.nbytes >> 20} MiB float64 array ({-(-self.nbytes // ARRAY[2])} chunks, "
                     f"{ARRAY[3] >> 10} KiB blocks)")

    def want(self, o):
        return self.x[o // 8: o // 8 + 512].tobytes()

    def offsets(self, n, seed):
        rng = random.Random(seed)
        return [rng.randrange(0, self.nbytes // 8 - 512) * 8 for _ in range(n)]


def ours(r, side, offs, threads):
    """A fresh mount, the `.npy` opened, then the reads: (wall, latencies, requests per read)."""
    m = r.c.mount(side.be)
    try:
        hdr = os.path.getsize(r.npy) - r.nbytes
        fd = os.open(r.npy, os.O_RDONLY)
        g0 = settle(side.be.count)
        wall, lat, got = threaded(lambda _, o: os.pread(fd, 4096, hdr + o), offs, threads)
        g1 = settle(side.be.count)
        os.close(fd)
    finally:
        m.close()
    assert got == [r.want(o) for o in offs], f"{side.be.src}: random reads differ from the array"
    return wall, lat, (g1 - g0) / len(offs)


def c2array(r, side, offs, threads):
    """One C2Array opened, then the same elements sliced."""
    arr = side.c2array()
    g0 = settle(side.be.count)
    wall, lat, got = threaded(lambda _, o: arr[o // 8: o // 8 + 512].tobytes(), offs, threads)
    g1 = settle(side.be.count)
    assert got == [r.want(o) for o in offs], "C2Array slices differ from the array"
    return wall, lat, (g1 - g0) / len(offs)


def raw(r, side, offs, threads):
    """A kept-alive connection per thread (connected first), then 4 KiB ranged GETs."""
    be = side.be
    conns = [http.client.HTTPConnection("127.0.0.1", be.port, timeout=30) for _ in range(threads)]
    for c in conns:
        c.connect()
    g0 = settle(be.count)
    try:
        wall, lat, _ = threaded(lambda k, o: remote.ranged_get_on(conns[k], be.port, be.key, o % r.span,
                                                                  o % r.span + 4095, be.sign), offs, threads)
    finally:
        for c in conns:
            c.close()
    return wall, lat, (settle(be.count) - g0) / len(offs)


def first_ours(r, side, o):
    """A fresh mount; from the moment it is up: stat, open and one pread of the `.npy`:
    (seconds, requests until the pread returned, requests until the unmount after it)."""
    m = r.c.mount(side.be)
    try:
        g0 = settle(side.be.count)
        t0 = time.perf_counter()
        hdr = os.path.getsize(r.npy) - r.nbytes
        fd = os.open(r.npy, os.O_RDONLY)
        got = os.pread(fd, 4096, hdr + o)
        t = time.perf_counter() - t0
        g1 = side.be.count()
        os.close(fd)
    finally:
        m.close()
    assert got == r.want(o), f"{side.be.src}: the first read differs from the array"
    return t, g1 - g0, settle(side.be.count) - g0


def first_c2array(r, side, o):
    """A new HTTP client (none of its connections kept), C2Array opened and sliced once."""
    fresh = getattr(blosc2.c2array, "_close_sync_client", None)
    if fresh:
        fresh()
    g0 = settle(side.be.count)
    t0 = time.perf_counter()
    got = side.c2array()[o // 8: o // 8 + 512].tobytes()
    t = time.perf_counter() - t0
    assert got == r.want(o), "C2Array's first slice differs from the array"
    return t, settle(side.be.count) - g0


def first_raw(r, side, o):
    """One ranged GET of 4 KiB on a new connection."""
    be = side.be
    g0 = settle(be.count)
    t0 = time.perf_counter()
    remote.ranged_get(be.port, be.key, o % r.span, o % r.span + 4095, be.sign)
    t = time.perf_counter() - t0
    return t, settle(be.count) - g0


def med(v):
    return statistics.median(v)


def rotate(rounds, sides):
    """`rounds` rounds of every function in `sides`, round k starting at side k (mod the
    count): each side's results."""
    got = [[] for _ in sides]
    for k in range(rounds):
        for i in range(len(sides)):
            j = (i + k) % len(sides)
            got[j].append(sides[j]())
    return got


def refs(side, what_raw, what_c2):
    """The references of `side`: raw GETs, and on Caterva2 C2Array too."""
    return [what_raw] + ([what_c2] if side.c2 else [])


def concurrent_rows(r, side, delay, rounds):
    """The READS random reads from each count of THREADS: bloscfs vs raw GETs (and C2Array)."""
    offs = r.offsets(READS, 7)
    theirs = refs(side, (raw, "raw ranged GETs of 4 KiB, a kept-alive connection per thread"),
                  (c2array, "python-blosc2 C2Array slices of the same 512 elements, one C2Array"))
    for threads in THREADS:
        sides = [ours] + [f for f, _ in theirs]
        mine, *ref = rotate(rounds, [lambda f=f: f(r, side, offs, threads) for f in sides])
        w_o, p_o = med(w for w, *_ in mine), med(med(lat) for _, lat, _ in mine)
        slow = med(max(lat) for _, lat, _ in mine)
        for res, (_, what) in zip(ref, theirs):
            w_r, p_r = med(w for w, *_ in res), med(med(lat) for _, lat, _ in res)
            r.b.row("remote", f"{side.be.name}, {threads} reader{'s' if threads > 1 else ''}, {READS} random 4 KiB "
                    f"reads of {r.what}, +{delay} ms RTT: wall of a fresh mount (p50 {p_o * 1e3:.2f} ms, slowest {slow * 1e3:.0f} ms, "
                    f"{remote.per(mine[-1][2])} requests per read) vs {what} (wall {w_r * 1e3:.0f} ms, p50 "
                    f"{p_r * 1e3:.2f} ms, {remote.per(res[-1][2])} requests per read)", w_o * 1e3, "ms", w_r / w_o)


def first_rows(r, side, delay, rounds):
    """The first read of a fresh mount vs one raw GET (and C2Array's open and first slice),
    each round at an offset of its own."""
    offs = r.offsets(rounds, 11)
    theirs = refs(side, (first_raw, "one raw ranged GET of 4 KiB on a new connection"),
                  (first_c2array, "python-blosc2 C2Array(...) opened by a new client and sliced once"))
    sides = [first_ours] + [f for f, _ in theirs]
    it = [iter(offs) for _ in sides]
    mine, *ref = rotate(rounds, [lambda f=f, i=i: f(r, side, next(i)) for f, i in zip(sides, it)])
    t_o = med(t for t, *_ in mine)
    _, during, until = mine[-1]
    for res, (_, what) in zip(ref, theirs):
        t_r = med(t for t, _ in res)
        r.b.row("remote", f"{side.be.name}, first 4 KiB read of {r.what} on a fresh mount, +{delay} ms RTT: stat, open and "
                f"pread of the .npy ({during} requests until it returned, {until} until the unmount after it) vs "
                f"{what} ({t_r * 1e3:.1f} ms, {res[-1][1]} requests)", t_o * 1e3, "ms", t_r / t_o)


def run(c, guarded):
    """The rows for every backend of `c` (remote.Ctx), at 0 ms and at DELAY_MS added."""
    r = Ctx(c)
    rounds = 1 if c.a.quick else c.runs
    for delay in (0, DELAY_MS):
        for be in c.backends + [c.c2]:
            proxy = Proxy(be.port, delay) if delay else None
            try:
                side = Side(c, be, proxy.port if proxy else be.port)
                guarded(c, f"{be.name} readers +{delay} ms", lambda: concurrent_rows(r, side, delay, rounds))
                guarded(c, f"{be.name} first read +{delay} ms", lambda: first_rows(r, side, delay, rounds))
            finally:
                if proxy:
                    proxy.close()
