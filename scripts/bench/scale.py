"""The scaling section of scripts/bench/bench.py (`--scale`, and part of the full run unless --quick).

For each CPU count k in 1, 2, 4, 8, ... up to the CPUs this process may run on (that
count always included), everything runs under `taskset -c` on the first k of them:
the daemon (its threads inherit the mask; its FUSE threads, at least 2, and its
decode-ahead workers are sized by Rust's `available_parallelism`, which counts the
mask), the readers and the references. On float64 series frames (zstd-1 and lz4-5,
shuffle, 8 MiB chunks), per k:
  - one sequential reader, 1 MiB reads, cold (fresh mount, page cache dropped), with
    default options, with `-o decode_ahead=0` (without decoding ahead) and again with
    default options on another mount (the control: the method's resolution)
  - k readers, each on its own 1/k of the file, the same three ways
  - `bloscfs cat FILE > /dev/null` (decoding alone, the source in the page cache;
    cat decodes on up to 32 threads)
  - C-Blosc2 in-process (python-blosc2, k threads) decompressing the frame chunk by
    chunk into one reused buffer, in a process of its own under the same taskset
  - the FUSE floor (fusefloor, as many worker threads as the daemon has), 1 and k readers
Rows are ratios: one reader against the target figure of issue 22 (on k <= 2 the
shared-core ceiling 1/(1/floor + 1/cat), on k >= 16 min(floor, cat), in between the
larger of the ceiling and min(floor, cat (k - 2) / k): two cores copy, k - 2 decode); default options against decode_ahead=0 (k readers: "never
worse"); the mount against C-Blosc2 and against the FUSE floor with the same CPUs.
"""

import os
import statistics
import subprocess
import sys
import threading
import time

MB = 1 << 20


def cpu_counts(allowed):
    """1, 2, 4, ... below len(allowed), then len(allowed) itself."""
    n, out, k = len(allowed), [], 1
    while k < n:
        out.append(k)
        k *= 2
    return out + [n]


def cpu_list(cpus):
    """`cpus` as a taskset list (0-3 or 0,2,5)."""
    cpus = sorted(cpus)
    if cpus == list(range(cpus[0], cpus[-1] + 1)):
        return f"{cpus[0]}-{cpus[-1]}" if len(cpus) > 1 else str(cpus[0])
    return ",".join(map(str, cpus))


def read_parts(path, k, cpus, bs=MB):
    """Seconds for k threads, run on `cpus`, to read `path` whole: thread i reads
    the i-th of k equal parts (whole `bs` reads) in `bs` reads from its own file
    descriptor into its own buffer. Every descriptor is open before the clock starts."""
    size = os.path.getsize(path)
    part = -(-size // k // bs) * bs
    fds = [os.open(path, os.O_RDONLY) for _ in range(k)]
    got = [0] * k
    go = threading.Barrier(k + 1)

    def reader(i):
        start, end = i * part, min(size, (i + 1) * part)
        buf = bytearray(bs)
        os.lseek(fds[i], start, os.SEEK_SET)
        go.wait()
        done = 0
        while start + done < end:
            n = os.readv(fds[i], [memoryview(buf)[: min(bs, end - start - done)]])
            if n == 0:
                break
            done += n
        got[i] = done

    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)  # the threads made now inherit it
    try:
        threads = [threading.Thread(target=reader, args=(i,)) for i in range(k)]
        for t in threads:
            t.start()
        go.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        t = time.perf_counter() - t0
    finally:
        os.sched_setaffinity(0, old)
        for fd in fds:
            os.close(fd)
    if sum(got) != size:
        raise RuntimeError(f"{path}: {k} readers read {sum(got)} bytes of {size}")
    return t


class Floor:
    """The FUSE floor (fusefloor) under `taskset -c cl` with `threads` workers."""

    def __init__(self, b, mp, size, cl, threads):
        self.mp = mp
        os.makedirs(mp, exist_ok=True)
        self.p = subprocess.Popen(["taskset", "-c", cl, b.FLOOR, mp, str(size), f"threads={threads}"],
                                  stderr=subprocess.DEVNULL)
        b.wait_mounted(mp)
        b.set_readahead(mp)
        t0 = time.time()  # its workers start once it is mounted
        while len(os.listdir(f"/proc/{self.p.pid}/task")) < threads and time.time() - t0 < 5:
            time.sleep(0.01)
        if len(os.listdir(f"/proc/{self.p.pid}/task")) < threads:
            self.close()
            raise RuntimeError(f"{b.FLOOR} runs fewer than {threads} threads: rebuild it "
                               "(cargo build --release -p fusefloor)")

    def close(self):
        subprocess.run(["fusermount3", "-u", self.mp])
        self.p.wait()


# C-Blosc2 in-process, run as `python scale.py ref FRAME THREADS RUNS` under taskset:
# the median seconds of RUNS decompressions of the whole frame, printed.
def ref_main(path, k, runs):
    import blosc2
    import numpy as np

    blosc2.set_nthreads(k)
    s = blosc2.open(path)
    assert s.dparams.nthreads == k, s.dparams
    buf = np.empty(s.chunksize, dtype="u1")
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for i in range(s.nchunks):
            s.decompress_chunk(i, buf)
        ts.append(time.perf_counter() - t0)
    print(statistics.median(ts))


def target_figure(k, floor1, cat):
    """Issue 22's figure for one reader on k CPUs, and its name: the shared-core
    ceiling on 2 CPUs or fewer (copying and decoding on the same cores), min(FUSE
    floor, cat) on 16 or more; in between, the larger of the ceiling and what the
    cores allow when the reader's two requests take two of them for copying and
    the other k - 2 decode: min(floor, cat (k - 2) / k)."""
    ceiling = 1 / (1 / floor1 + 1 / cat)
    if k <= 2:
        return ceiling, "ceiling 1/(1/floor + 1/cat)"
    if k >= 16:
        return min(floor1, cat), "min(floor, cat)"
    split = min(floor1, cat * (k - 2) / k)
    return max(ceiling, split), f"max(ceiling, min(floor, cat x {k - 2}/{k}))"


def run(b, a, d, size):
    """Measure the scaling rows; `b` is bench.py (row, Mount, ...), `a` its arguments,
    `d` its data dir, `size` the series' size in bytes."""
    import blosc2

    src = os.path.join(d, "src")
    C, F = blosc2.Codec, blosc2.Filter
    files = {name: b.make_series(src, size, c, f, f"{name}-{size >> 20}M")
             for name, c, f in [("zstd-shuffle", C.ZSTD, F.SHUFFLE), ("lz4-shuffle", C.LZ4, F.SHUFFLE)]}
    nbytes = blosc2.open(files["zstd-shuffle"]).nbytes
    allowed = sorted(os.sched_getaffinity(0))
    for name, p in files.items():
        # The mounts read cold sources: where the disk is slower than decoding,
        # their rows show the disk. This says how fast it gives a source.
        ts = []
        for _ in range(a.runs):
            b.drop_caches()
            t0 = time.perf_counter()
            b.read_seq(p)
            ts.append(time.perf_counter() - t0)
        t = statistics.median(ts)
        b.row("scale", f"{name}: the source read cold, 1 MiB reads ({os.path.getsize(p) / t / 1e9:.2f} GB/s "
              "of its compressed bytes): the rate of decoded bytes it allows", nbytes / t / 1e9, "GB/s")
    for k in cpu_counts(allowed):
        s = Step(b, a, d, src, allowed[:k], nbytes)
        rates = s.measure(files)  # by series: by kind, one rate a run
        for name, p in files.items():
            s.rows(name, rates[name], s.reference(p))


class Step:
    """The measurements on one CPU count: k CPUs, `cl` for taskset."""

    def __init__(self, b, a, d, src, cpus, nbytes):
        self.b, self.a, self.src, self.cpus, self.nbytes = b, a, src, cpus, nbytes
        self.k, self.cl = len(cpus), cpu_list(cpus)
        self.mp, self.fmp = os.path.join(d, "scale-mnt"), os.path.join(d, "scale-floor")

    def measure(self, files):
        """Rates (bytes/s) by series and kind, one a run: each run measures every
        kind once (the mounts in an order reversed every other run), so the
        machine's drift weighs on all, and ratios are taken run by run. The kind
        "control" is a second mount with default options: against "default", the
        method's resolution (1.0x is the truth)."""
        k, got = self.k, {name: {} for name in files}
        mounts = [(kind, o, n) for kind, o in (("default", ""), ("decode_ahead=0", "decode_ahead=0"),
                                                ("control", "")) for n in sorted({1, k})]
        # The floor's worker threads: bloscfs's default, the CPUs it may run on, at least 2.
        fl = Floor(self.b, self.fmp, self.nbytes, self.cl, max(2, k))
        data = os.path.join(self.fmp, "data")
        try:
            for r in range(self.a.runs):
                floor = {"floor1": read_parts(data, 1, self.cpus)}
                floor["floork"] = read_parts(data, k, self.cpus) if k > 1 else floor["floor1"]
                for name, p in files.items():
                    t = dict(floor, cat=self.cat(p))
                    for kind, o, n in (mounts if r % 2 == 0 else mounts[::-1]):
                        t[(kind, n)] = self.mount(p, o, n)
                    for kind, v in t.items():
                        got[name].setdefault(kind, []).append(self.nbytes / v)
        finally:
            fl.close()
        return got

    def cat(self, p):
        """Seconds of `bloscfs cat p > /dev/null` on the CPUs, the source in the page cache."""
        self.b.read_seq(p)
        t0 = time.perf_counter()
        subprocess.run(["taskset", "-c", self.cl, self.b.BIN, "cat", p], stdout=subprocess.DEVNULL, check=True)
        return time.perf_counter() - t0

    def mount(self, p, opts, readers):
        """Seconds for `readers` readers to read p's file through a fresh mount, cold."""
        self.b.drop_caches()
        m = self.b.Mount(self.src, self.mp, opts=opts, pin=self.cl)
        try:
            return read_parts(os.path.join(self.mp, os.path.basename(p)[: -len(".b2frame")]), readers, self.cpus)
        finally:
            m.close()

    def reference(self, p):
        """C-Blosc2's rate on the frame `p`, k threads, in a process on the CPUs."""
        self.b.read_seq(p)
        ref = subprocess.run(["taskset", "-c", self.cl, sys.executable, os.path.abspath(__file__), "ref", p,
                              str(self.k), str(self.a.runs)], capture_output=True, text=True)
        if ref.returncode != 0:
            raise RuntimeError(f"C-Blosc2 reference on {p}: {ref.stderr.strip()}")
        return self.nbytes / float(ref.stdout)

    def rows(self, name, r, ref):
        """The rows of one series from its rates `r` (a list by kind, one a run)
        and C-Blosc2's rate `ref`. A ratio is the median of the runs' ratios."""
        k, row, med = self.k, self.b.row, statistics.median
        g = lambda x: f"{med(x) / 1e9:.2f} GB/s"
        per = lambda x, y: med(a / b for a, b in zip(x, y))
        tag = f"{name}, {k} CPU{'s' if k > 1 else ''}"
        figs = [target_figure(k, f, c) for f, c in zip(r["floor1"], r["cat"])]
        fig_name = figs[0][1]
        fig = [f for f, _ in figs]
        for n, floor in ((1, r["floor1"]), (k, r["floork"])) if k > 1 else ((1, r["floor1"]),):
            readers = f"{n} reader{'s' if n > 1 else ''}"
            ours = r[("default", n)]
            if n == 1:
                row("scale", f"{tag}: 1 reader, default options, vs {fig_name} = {g(fig)} (FUSE floor "
                    f"{g(r['floor1'])}, cat {g(r['cat'])})", med(ours) / 1e9, "GB/s", per(ours, fig), "0.8x")
            row("scale", f"{tag}: {readers}, default vs -o decode_ahead=0 ({g(r[('decode_ahead=0', n)])})",
                med(ours) / 1e9, "GB/s", per(ours, r[("decode_ahead=0", n)]), ">= 1.0x" if n > 1 else "")
            row("scale", f"{tag}: {readers}, control: default vs another mount with default options "
                f"({g(r[('control', n)])}; 1.0x is the method's truth)", med(ours) / 1e9, "GB/s",
                per(ours, r[("control", n)]))
            row("scale", f"{tag}: {readers} vs C-Blosc2 in-process, {k} thread{'s' if k > 1 else ''} "
                f"({ref / 1e9:.2f} GB/s)", med(ours) / 1e9, "GB/s", med(ours) / ref)
            row("scale", f"{tag}: {readers} vs the FUSE floor, {readers} ({g(floor)})", med(ours) / 1e9, "GB/s",
                per(ours, floor))


if __name__ == "__main__" and sys.argv[1:2] == ["ref"]:
    ref_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
