"""The remote section of scripts/bench/bench.py (`--remote`, and part of the full run).

bloscfs mounts of an S3 bucket (moto) and of a Caterva2 root (cat2-server), both
started here on 127.0.0.1, against what a user would do without bloscfs:
  - cold sequential read of one float64 array (b2nd, 8 MiB chunks) presented as
    `.npy`: vs downloading the compressed object in 8 MiB ranged GETs, 8 in
    flight, and decoding it with python-blosc2 in memory; vs python-blosc2's
    own remote access to Caterva2 (`C2Array(...)[:]`)
  - cold random 4 KiB reads (p50, requests per read): vs `C2Array` slices of
    the same elements; vs one raw ranged GET of 4 KiB (the floor: one round trip)
  - the same reads over plain HTTP (scripts/servers/faulty.py serving the file with
    a manifest, no faults): moto reads a whole object for every ranged GET, so its
    times grow with the object's size; faulty.py reads only the range
  - `ls -l` of a prefix of 1,000 small containers: vs boto3's paginated
    ListObjectsV2 (the floor: listing names and sizes without reading anything)
  - random 4 KiB reads from 1 and 8 threads, and the first read of a fresh mount, with
    and without 10 ms added to every round trip (scripts/bench/readers.py)
Loopback has no network latency: the request counts say more than the times.
They are counted by the servers (moto's and cat2-server's access logs,
faulty.py's /_stats), so they include every request the daemon makes.
The servers come from the servers venv: $BENCH_SERVERS_VENV, else .venv-servers
in the repository (scripts/setup.sh makes it), else /tmp/vs; the plain HTTP
server is scripts/servers/faulty.py (or $BENCH_FAULTY).
"""

import datetime
import hashlib
import hmac
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import blosc2
import numpy as np

import readers

MB = 1 << 20
S3CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "s3client.py")
BUCKET = "bench"
C2_ROOT = "@public"  # cat2-server serves DIR/public as the root `@public`
ACCESS_KEY, SECRET_KEY, REGION = "testing", "testing", "us-east-1"  # moto takes any


def servers_bin(root):
    """The servers venv's bin directory, or None."""
    for d in (os.environ.get("BENCH_SERVERS_VENV"), os.path.join(root, ".venv-servers"), "/tmp/vs"):
        if d and os.path.exists(os.path.join(d, "bin", "moto_server")):
            return os.path.join(d, "bin")
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process on 127.0.0.1:port, ready when `probe` answers 200; its
    output (with the access log of every request) goes to the file `log`."""

    def __init__(self, cmd, port, probe, log, env=None):
        self.port, self.log = port, log
        with open(log, "w") as f:
            self.p = subprocess.Popen(cmd, env=dict(env or os.environ, PYTHONUNBUFFERED="1"), stdout=f,
                                      stderr=subprocess.STDOUT)
        t = time.time()
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{probe}", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.p.poll() is not None or time.time() - t > 60:
                self.close()
                raise RuntimeError(f"{cmd[0]} did not start on port {port} (see {log})")
            time.sleep(0.2)

    def logged(self, pattern):
        """Lines of the access log so far that contain `pattern`: each request is one
        line (moto colours some), written once it is answered, so a moment's wait
        first lets the last one land."""
        time.sleep(0.05)
        with open(self.log, errors="replace") as f:
            return sum(pattern in line for line in f)

    def close(self):
        self.p.terminate()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def make_array(path, nbytes, chunk=8 * MB, block=None):
    """A compressible 1-D float64 array (a rounded random walk) of `nbytes`, `chunk`-byte
    chunks, `block`-byte blocks (None: python-blosc2's choice)."""
    if not os.path.exists(path):
        rng = np.random.default_rng(42)
        x = (np.cumsum(rng.normal(size=nbytes // 8)) * 0.01).round(3)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        blosc2.asarray(x, urlpath=path, mode="w", chunks=(chunk // 8,), blocks=block and (block // 8,),
                       cparams=dict(codec=blosc2.Codec.ZSTD, clevel=1, filters=[blosc2.Filter.SHUFFLE]))
    return path


def make_many(top, n):
    """`n` small containers (4,000 bytes each decoded) under `top`."""
    if not os.path.exists(os.path.join(top, f"f{n - 1:04d}.b2")):
        os.makedirs(top, exist_ok=True)
        c = blosc2.compress2(np.arange(1000, dtype="<i4").tobytes(), typesize=4)
        for i in range(n):
            with open(os.path.join(top, f"f{i:04d}.b2"), "wb") as f:
                f.write(c)
    return top


EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def sigv4(method, port, path, headers):
    """`headers` with an AWS Signature V4 (as botocore signs) for a request with no
    query and no body to 127.0.0.1:port."""
    amz = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    signed = {"host": f"127.0.0.1:{port}", "x-amz-content-sha256": EMPTY_SHA256, "x-amz-date": amz,
              **{k.lower(): v for k, v in headers.items()}}
    names = ";".join(sorted(signed))
    canon = "\n".join([method, quote(path, safe="/-_.~"), ""] + [f"{k}:{signed[k]}" for k in sorted(signed)]
                      + ["", names, EMPTY_SHA256])
    scope = f"{amz[:8]}/{REGION}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(canon.encode()).hexdigest()])
    k = ("AWS4" + SECRET_KEY).encode()
    for part in (amz[:8], REGION, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    auth = f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{scope}, SignedHeaders={names}, Signature={sig}"
    return dict(headers, **{"x-amz-content-sha256": EMPTY_SHA256, "x-amz-date": amz}, Authorization=auth)


def ranged_get(port, path, start, end, sign=True):
    """One GET (`sign`: S3-signed) of bytes start..=end of the object at `path`, on a
    connection of its own: (body, object length)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        return ranged_get_on(c, port, path, start, end, sign)
    finally:
        c.close()


def ranged_get_on(c, port, path, start, end, sign=True):
    """`ranged_get` on the HTTPConnection `c` to `port`, which stays open (keep-alive)."""
    headers = {"Range": f"bytes={start}-{end}"}
    c.request("GET", path, headers=sigv4("GET", port, path, headers) if sign else headers)
    r = c.getresponse()
    body = r.read()
    if r.status != 206:
        raise RuntimeError(f"GET {path} bytes {start}-{end}: HTTP {r.status}")
    total = int(r.getheader("Content-Range").rsplit("/", 1)[1])
    if len(body) != min(end, total - 1) - start + 1:
        raise RuntimeError(f"GET {path} bytes {start}-{end}: {len(body)} bytes")
    return body, total


def download(port, path, sign, part=8 * MB, inflight=8):
    """The whole object at `path` in `part`-sized ranged GETs, `inflight` at once
    (the first tells the length): (bytes, requests)."""
    first, total = ranged_get(port, path, 0, part - 1, sign)
    buf = bytearray(total)
    buf[: len(first)] = first
    starts = list(range(part, total, part))

    def fetch(o):
        body, _ = ranged_get(port, path, o, min(o + part, total) - 1, sign)
        buf[o: o + len(body)] = body

    with ThreadPoolExecutor(inflight) as pool:
        list(pool.map(fetch, starts))
    return buf, 1 + len(starts)


def run(b, a, d):
    """Measure the remote rows; `b` is bench.py (row, Mount, ...), `a` its arguments, `d` its data dir."""
    bins = servers_bin(b.ROOT)
    if bins is None:
        raise RuntimeError("no servers venv (.venv-servers: run scripts/setup.sh, or set $BENCH_SERVERS_VENV)")
    nbytes = 16 * MB if a.quick else 256 * MB
    n_many = 1000
    top = os.path.join(d, "remote")
    local, data, state, web = prepare(top, nbytes, n_many, readers.ARRAY)
    os.environ.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_REGION=REGION)
    servers = []
    try:
        port, c2port, hport = free_port(), free_port(), free_port()
        moto = Server([os.path.join(bins, "moto_server"), "-H", "127.0.0.1", "-p", str(port)], port, "/",
                      os.path.join(top, "moto.log"))
        servers.append(moto)
        subprocess.run([os.path.join(bins, "python"), S3CLIENT,
                        f"http://127.0.0.1:{port}", "fill", BUCKET, data], check=True, capture_output=True)
        cat2 = Server([os.path.join(bins, "cat2-server"), "--statedir", state, "--listen", f"127.0.0.1:{c2port}"],
                      c2port, "/api/roots", os.path.join(top, "cat2.log"),
                      env=dict(os.environ, CATERVA2_SECRET="bench"))
        servers.append(cat2)
        faulty = os.environ.get("BENCH_FAULTY") or os.path.join(b.ROOT, "scripts/servers/faulty.py")
        http = None
        if os.path.exists(faulty):
            http = Server([sys.executable, faulty, web, "--port", str(hport)], hport, "/_stats",
                          os.path.join(top, "http.log"))
            servers.append(http)
        else:
            print("[remote] no scripts/servers/faulty.py: no plain HTTP rows")
        c = Ctx(b, a, d, nbytes, local)
        # Requests counted by the servers: moto's and cat2-server's access logs, faulty.py's /_stats.
        c.backends = [Backend("S3", f"s3://{BUCKET}/big", f"endpoint=http://127.0.0.1:{port}", port,
                              f"/{BUCKET}/big/x.b2nd", sign=True, count=lambda: moto.logged("GET /" + BUCKET))]
        if http:
            c.backends.append(Backend("HTTP", f"http://127.0.0.1:{hport}/big/", f"manifest={MANIFEST}", hport,
                                      "/big/x.b2nd", sign=False, count=faulty_gets(hport)))
        c.c2 = Backend("Caterva2", f"caterva2://127.0.0.1:{c2port}/{C2_ROOT}", "", c2port, None, sign=False,
                       count=lambda: cat2.logged(" /api/"))  # C2Array POSTs its fetches
        c.c2base = f"http://127.0.0.1:{c2port}/"
        c.s3port, c.bins, c.moto = port, bins, moto
        sequential(c)
        random_reads(c)
        readers.run(c, guarded)
        guarded(c, "S3 ls -l", lambda: listing(c, n_many))
    finally:
        if b.is_mounted(os.path.join(d, "mnt")):  # a measurement failed mid-way
            subprocess.run(["fusermount3", "-u", os.path.join(d, "mnt")])
        for srv in reversed(servers):
            srv.close()


def prepare(top, nbytes, n_many, small):
    """The data under `top`: the array x.b2nd, the array `small` (name, bytes, chunk and block bytes)
    beside it and `n_many` small containers (for S3), the arrays in a Caterva2 root and
    in a plain HTTP tree with a manifest; their paths."""
    data = os.path.join(top, f"data-{nbytes >> 20}M")
    local = make_array(os.path.join(data, "big", "x.b2nd"), nbytes)
    name, *shape = small
    other = make_array(os.path.join(data, "big", name), *shape)
    make_many(os.path.join(data, "many"), n_many)
    state, web = os.path.join(top, "c2state"), os.path.join(top, "http")
    for dir_ in (state, web):
        shutil.rmtree(dir_, ignore_errors=True)
    os.makedirs(os.path.join(state, "public"))
    os.makedirs(os.path.join(web, "big"))
    for path in (local, other):
        os.link(path, os.path.join(state, "public", os.path.basename(path)))
        os.link(path, os.path.join(web, "big", os.path.basename(path)))
    with open(os.path.join(web, "big", MANIFEST), "w") as f:
        f.write("".join(f"{os.path.getsize(p)} {os.path.basename(p)}\n" for p in (local, other)))
    return local, data, state, web


MANIFEST = "manifest.txt"


def faulty_gets(port):
    """A counter of the GETs faulty.py on `port` has answered."""
    def count():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stats", timeout=10) as r:
            return json.load(r)["gets"]
    return count


class Backend:
    """One remote source: its URL and mount options, the object a plain client
    reads, and the server's count of requests answered."""

    def __init__(self, name, src, opts, port, key, sign, count):
        self.name, self.src, self.opts, self.port, self.key, self.sign = name, src, opts, port, key, sign
        self.count = count

    def get(self, start, end):
        return ranged_get(self.port, self.key, start, end, self.sign)

    def download(self):
        return download(self.port, self.key, self.sign)


class Ctx:
    """What every part of the section needs."""

    def __init__(self, b, a, d, nbytes, local):
        self.b, self.a, self.nbytes = b, a, nbytes
        self.mp = os.path.join(d, "mnt")
        self.runs = 1 if a.quick else a.runs
        self.local = local
        self.compressed_len = os.path.getsize(local)
        self.x = blosc2.open(local)[:]
        assert self.x.nbytes == nbytes
        self.npy = os.path.join(self.mp, "x.npy")

    def mount(self, be):
        return self.b.Mount(be.src, self.mp, opts=be.opts)


def alternate(runs, ours, theirs):
    """`runs` rounds of both, which goes first alternating: (ours' results, theirs')."""
    got = ([], [])
    for k in range(runs):
        for side in ((0, 1) if k % 2 == 0 else (1, 0)):
            got[side].append((ours, theirs)[side]())
    return got


def med(v):
    return statistics.median(v)


def sequential(c):
    """Cold sequential reads of x.npy through a mount vs the download-and-decode
    baseline (S3, HTTP) and C2Array[:] (Caterva2)."""
    b = c.b

    def ours(be):
        def f():
            b.drop_caches()
            g0 = be.count()
            m = c.mount(be)
            t0 = time.perf_counter()
            n = b.read_seq(c.npy)
            t = time.perf_counter() - t0
            gets = be.count() - g0
            m.close()
            assert n > c.nbytes, n
            return t, gets
        return f

    def download_decode(be):
        def f():
            t0 = time.perf_counter()
            buf, reqs = be.download()
            x = blosc2.ndarray_from_cframe(buf)[:]
            t = time.perf_counter() - t0
            assert x.nbytes == c.nbytes
            return t, reqs
        return f

    def c2array():
        b.drop_caches()
        t0 = time.perf_counter()
        arr = blosc2.C2Array(f"{C2_ROOT}/x.b2nd", urlbase=c.c2base)
        x = arr[:]
        t = time.perf_counter() - t0
        assert x.nbytes == c.nbytes
        return t, arr.traffic.requests + 1  # + its api/info

    what = "8 MiB ranged GETs, 8 in flight, + python-blosc2 decode"
    def one(be, theirs, what):
        theirs()  # warm: the server's caches, python-blosc2's first decode
        mine, ref = alternate(c.runs, ours(be), theirs)
        verify_npy(c, be)
        t_o, t_r = med(t for t, _ in mine), med(t for t, _ in ref)
        b.row("remote", f"{be.name} cold sequential, {c.nbytes >> 20} MiB float64 ({c.compressed_len / MB:.0f} MiB "
              f"stored): read of the mount's .npy ({mine[-1][1]} requests from the mount to the last byte) vs "
              f"{what} ({c.nbytes / t_r / 1e9:.2f} GB/s, {ref[-1][1]} requests)", c.nbytes / t_o / 1e9, "GB/s",
              t_r / t_o)

    for be, theirs, what in [(be, download_decode(be), what) for be in c.backends] + [
            (c.c2, c2array, "python-blosc2 C2Array(...)[:]")]:
        guarded(c, f"{be.name} cold sequential", lambda: one(be, theirs, what))


def guarded(c, what, fn):
    """Run `fn`; if it fails, say so and unmount what it left mounted: the other rows still run."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        print(f"[remote] {what}: failed: {e!r}", flush=True)
        if c.b.is_mounted(c.mp):
            subprocess.run(["fusermount3", "-u", c.mp])


def verify_npy(c, be):
    """The mount's x.npy holds the array (checked once, untimed)."""
    m = c.mount(be)
    try:
        assert (np.load(c.npy, mmap_mode="r") == c.x).all(), f"{be.src}: x.npy differs from the array"
    finally:
        m.close()


def per(v):
    return "?" if v is None else f"{v:.2f}".rstrip("0").rstrip(".")


def random_reads(c):
    """Cold random 4 KiB reads: a fresh mount per round vs one raw ranged GET
    (the floor) and, for Caterva2, C2Array slices of the same elements."""
    b = c.b
    n_r = 20 if c.a.quick else 60
    rng = random.Random(5)
    offs = [rng.randrange(0, c.nbytes // 8 - 512) * 8 for _ in range(n_r)]
    want = [c.x[o // 8: o // 8 + 512].tobytes() for o in offs]

    def ours(be):
        def f():
            b.drop_caches()
            g0 = be.count()
            m = c.mount(be)
            hdr = os.path.getsize(c.npy) - c.nbytes
            fd = os.open(c.npy, os.O_RDONLY)
            g1, got = be.count(), []
            lat = b.latencies(lambda o: got.append(os.pread(fd, 4096, hdr + o)), offs[:1])
            g2 = be.count()
            lat += b.latencies(lambda o: got.append(os.pread(fd, 4096, hdr + o)), offs[1:])
            g3 = be.count()
            os.close(fd)
            m.close()
            assert got == want, f"{be.src}: random reads differ from the array"
            return lat, g1 - g0, g2 - g1, (g3 - g2) / (n_r - 1)
        return f

    def c2array():
        b.drop_caches()
        arr = blosc2.C2Array(f"{C2_ROOT}/x.b2nd", urlbase=c.c2base)
        r0, got = arr.traffic.requests, []
        lat = b.latencies(lambda o: got.append(arr[o // 8: o // 8 + 512].tobytes()), offs)
        assert got == want, "C2Array slices differ from the array"
        return lat, (arr.traffic.requests - r0) / n_r

    span = c.compressed_len - 4096

    def raw(be):
        return lambda: (b.latencies(lambda o: be.get(o % span, o % span + 4095), offs), 1)

    def p50(res):
        return med(med(lat) for lat, *_ in res)

    floor = "one raw ranged GET of 4 KiB at random offsets of the object (the floor: 1 round trip)"
    def one(be, theirs, what):
        mine, ref = alternate(c.runs, ours(be), theirs)
        p_o, p_r = p50(mine), p50(ref)
        _, g_open, g_first, g_then = mine[-1]
        gets = f"{g_open} requests to mount and open, {g_first} for the first read, then {per(g_then)} per read"
        b.row("remote", f"{be.name} cold random 4 KiB p50, {n_r} reads, fresh mount per round ({gets}) "
              f"vs {what} (p50 {p_r * 1e3:.2f} ms, {per(ref[-1][1])} requests per read)", p_o * 1e3, "ms", p_r / p_o)

    for be, theirs, what in [(be, raw(be), floor) for be in c.backends] + [
            (c.c2, c2array, "python-blosc2 C2Array slices of the same 512 elements")]:
        guarded(c, f"{be.name} cold random 4 KiB", lambda: one(be, theirs, what))


def listing(c, n):
    """`ls -l` of a prefix of `n` small containers through a fresh mount vs boto3's
    paginated ListObjectsV2 (names and stored sizes: the floor, which reads no
    container; `ls -l` shows decoded sizes, which are in the containers' headers)."""
    b = c.b
    be = Backend("S3", f"s3://{BUCKET}/many", f"endpoint=http://127.0.0.1:{c.s3port}", c.s3port, None, sign=True,
                 count=None)

    def requests():
        return c.moto.logged("GET /" + BUCKET), c.moto.logged("list-type=2")

    def ours():
        (g0, l0), m = requests(), c.mount(be)
        t0 = time.perf_counter()
        out = b.sh(f"ls -l {c.mp}").stdout
        t = time.perf_counter() - t0
        g1, l1 = requests()
        m.close()
        lines = out.splitlines()[1:]
        bad = [l for l in lines if l.split()[4] != "4000"]
        assert len(lines) == n and not bad, f"{len(lines)} of {n} entries; not 4000 bytes: {bad[:3]}"
        return t, (g1 - g0) - (l1 - l0), l1 - l0

    def floor():
        r = subprocess.run([os.path.join(c.bins, "python"), S3CLIENT, f"http://127.0.0.1:{c.s3port}", "list", BUCKET,
                            "many"], capture_output=True, check=True, text=True)
        t, keys, _, reqs = r.stdout.split()
        assert int(keys) == n, r.stdout
        return float(t), int(reqs)

    mine, ref = alternate(c.runs, ours, floor)
    t_o, t_r = med(t for t, *_ in mine), med(t for t, _ in ref)
    _, gets, lists = mine[-1]
    b.row("remote", f"S3 ls -l of {n:,} containers, fresh mount ({lists} LISTs, {gets} GETs) vs boto3 "
          f"ListObjectsV2 paginated ({t_r * 1e3:.0f} ms, {ref[-1][1]} requests)", t_o * 1e3, "ms", t_r / t_o)
