#!/usr/bin/env python3
"""b2nd arrays compressed with C-Blosc2's ZFP plugin codecs (33 zfp_acc,
34 zfp_prec, 35 zfp_rate), written by the python-blosc2 release this runs
under, and what that release reads back from them.

    python scripts/writers/zfp.py fixtures
        writes tests/fixtures/writers/zfp/<release>/*.b2nd and manifest.json:
        per array its codec, meta, shapes, dtype and the SHA-256 of
        `blosc2.open(p)[...]` in C order (what bloscfs must serve after the
        .npy header). Run once per release, each from its own venv, e.g.
        .venv/bin/python (4.14.1), /work/venvs/b2-3.0.0/bin/python,
        /work/venvs/b2-4.0.0/bin/python.

    python scripts/writers/zfp.py sweep N BLOSCFS [SEED]
        writes N random ZFP arrays (float32/float64, 1-4 dimensions, odd
        shapes, partial chunks and blocks, the three modes, many metas, some
        with special values) to a temporary directory, reads each with
        `BLOSCFS cat` and with `blosc2.open(p)[...]`, compares them bit for
        bit, and prints the counts (nothing is kept).

ZFP needs every block dimension to be at least 4 (one ZFP cell), typesize 4
or 8, and no shuffle.
"""

import hashlib
import io
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

import blosc2
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "writers", "zfp", blosc2.__version__)
CODECS = {
    "acc": blosc2.Codec.ZFP_ACC,
    "prec": blosc2.Codec.ZFP_PREC,
    "rate": blosc2.Codec.ZFP_RATE,
}


def values(shape, dtype, kind, rng):
    """Smooth data with noise (what ZFP is for), or harder content."""
    n = int(np.prod(shape))
    if kind == "smooth":
        grids = np.meshgrid(*[np.linspace(0, 3, d) for d in shape], indexing="ij")
        v = sum(np.sin((k + 1) * g) for k, g in enumerate(grids)) * 100
        v = v + rng.standard_normal(shape) * 0.5
    elif kind == "noise":
        v = rng.standard_normal(shape) * 1e3
    elif kind == "wide":
        # Magnitudes from tiny to huge, both signs.
        v = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
        v = v.reshape(shape)
    elif kind == "zeros":
        v = np.zeros(shape)
        v.flat[:: max(1, n // 7)] = 1.5
    elif kind == "sparse":
        v = np.zeros(shape)
        v.flat[::37] = 1.5
    elif kind == "special":
        v = rng.standard_normal(shape) * 10
        v.flat[:: max(1, n // 5)] = np.nan
        v.flat[1 :: max(1, n // 3)] = np.inf
    else:
        raise ValueError(kind)
    return np.asarray(v, dtype=dtype)


def write(path, arr, chunks, blocks, mode, meta, splitmode=None):
    cparams = {
        "codec": CODECS[mode],
        "codec_meta": meta,
        "filters": [blosc2.Filter.NOFILTER],
        "filters_meta": [0],
    }
    if splitmode is not None:
        cparams["splitmode"] = splitmode
    blosc2.asarray(arr, chunks=chunks, blocks=blocks, cparams=cparams, urlpath=path, mode="w")


def split_zfp_streams(path):
    """Chunks whose blocks are split into streams that are ZFP-coded (not
    stored raw): C-Blosc2 3.3.5 (python-blosc2 4.14) refuses those, and
    older releases overrun their buffers reading them, returning what the
    heap holds or crashing. bloscfs refuses them too."""
    arr = blosc2.open(path)  # keeps the schunk alive
    sc = arr.schunk
    n = 0
    for i in range(sc.nchunks):
        c = sc.get_chunk(i)
        flags, ts = c[2], c[3]
        nbytes, blocksize = struct.unpack_from("<ii", c, 4)
        if flags & 0x02 or flags & 0x10 or c[31] & 0x70:  # memcpyed, unsplit, special
            continue
        neblock = blocksize // ts
        for b in range(-(-nbytes // blocksize)):
            pos = struct.unpack_from("<i", c, 32 + 4 * b)[0]
            for _ in range(ts):
                csize = struct.unpack_from("<i", c, pos)[0]
                pos += 4 + max(csize, 0) + (csize < 0)
                if 0 < csize != neblock:
                    n += 1
    return n


def reference(path):
    a = blosc2.open(path)[...]
    return np.ascontiguousarray(a)


# name: (shape, chunks, blocks, dtype, data kind, mode, meta)
FIXTURES = {
    "acc-f4-1d": ((1000,), (300,), (64,), "<f4", "smooth", "acc", 256 - 3),
    "acc-f8-2d": ((37, 29), (20, 16), (8, 8), "<f8", "smooth", "acc", 256 - 2),
    "acc-f4-3d": ((13, 11, 9), (8, 8, 8), (4, 4, 4), "<f4", "noise", "acc", 1),
    "acc-f8-4d": ((7, 6, 9, 5), (5, 6, 8, 5), (4, 4, 4, 4), "<f8", "smooth", "acc", 0),
    "prec-f8-1d": ((999,), (512,), (128,), "<f8", "wide", "prec", 20),
    "prec-f4-2d": ((50, 33), (25, 33), (8, 12), "<f4", "smooth", "prec", 6),
    "prec-f8-3d": ((10, 12, 14), (10, 12, 7), (5, 6, 7), "<f8", "smooth", "prec", 40),
    "prec-f4-4d": ((9, 8, 7, 6), (9, 8, 7, 6), (5, 4, 7, 6), "<f4", "noise", "prec", 3),
    "rate-f4-1d": ((777,), (400,), (100,), "<f4", "smooth", "rate", 25),
    "rate-f8-2d": ((41, 23), (30, 23), (8, 8), "<f8", "noise", "rate", 50),
    "rate-f4-3d": ((12, 10, 11), (6, 10, 11), (6, 5, 4), "<f4", "smooth", "rate", 10),
    "rate-f8-4d": ((6, 7, 8, 9), (4, 7, 8, 6), (4, 4, 4, 6), "<f8", "smooth", "rate", 40),
    # Many blocks in one chunk, for a read that must decode just one.
    "rate-f8-blocks": ((64, 64), (64, 64), (8, 8), "<f8", "smooth", "rate", 30),
    # Blocks split into one stream per byte of an item: 3.0 and 4.0 write
    # each as a ZFP stream of the whole block (read back past their
    # buffers), 4.14 stores them raw.
    "split-acc-f4-1d": ((256,), (128,), (64,), "<f4", "sparse", "acc", 2, "split"),
}


def fixtures():
    blosc2.set_nthreads(1)
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    rng = np.random.default_rng(18)
    entries = []
    for name, (shape, chunks, blocks, dtype, kind, mode, meta, *split) in FIXTURES.items():
        p = os.path.join(OUT, name + ".b2nd")
        split = blosc2.SplitMode.ALWAYS_SPLIT if split else None
        why = write_and_read(p, values(shape, dtype, kind, rng), chunks, blocks, mode, meta, split)
        ref = np.load(p + ".ref.npy") if why is None else None
        for tmp in (p + ".err", p + ".ref.npy"):
            if os.path.exists(tmp):
                os.remove(tmp)
        if split_zfp_streams(p):
            # The writer's own reader returns what its heap holds, or crashes.
            why = why or "read back past its buffers"
            entries.append({"path": os.path.basename(p), "codec": "zfp_" + mode, "refuse": why})
            continue
        assert why is None, why
        entries.append(
            {
                "path": os.path.basename(p),
                "codec": "zfp_" + mode,
                "meta": meta,
                "shape": list(shape),
                "chunks": list(chunks),
                "blocks": list(blocks),
                "dtype": dtype,
                "data": kind,
                "sha256": hashlib.sha256(ref.tobytes()).hexdigest(),
            }
        )
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"writer": "python-blosc2 " + blosc2.__version__, "fixtures": entries}, f, indent=1)
        f.write("\n")
    print(f"{len(entries)} arrays in {OUT}: {[e['path'] for e in entries if 'refuse' in e]} split into ZFP streams (refused)")


def random_case(rng):
    ndim = rng.integers(1, 5)
    dtype = ["<f4", "<f8"][rng.integers(0, 2)]
    # Block dims from 4 (one ZFP cell) up, not always multiples of 4.
    blocks = [int(rng.integers(4, [200, 24, 10, 7][ndim - 1] + 1)) for _ in range(ndim)]
    chunks = [b * int(rng.integers(1, 4)) - int(rng.integers(0, 3)) for b in blocks]
    chunks = [max(c, b) for c, b in zip(chunks, blocks)]
    shape = [max(1, c * int(rng.integers(1, 3)) - int(rng.integers(0, c))) for c in chunks]
    mode = ["acc", "prec", "rate"][rng.integers(0, 3)]
    if mode == "acc":
        meta = int(rng.integers(-8, 4)) & 0xFF
    elif mode == "prec":
        meta = int(rng.integers(0, 64))
    else:
        meta = int(rng.integers(1, 101))
    kind = ["smooth", "smooth", "noise", "wide", "zeros", "special"][rng.integers(0, 6)]
    split = [None, None, None, blosc2.SplitMode.ALWAYS_SPLIT, blosc2.SplitMode.NEVER_SPLIT][
        rng.integers(0, 5)
    ]
    return tuple(shape), tuple(chunks), tuple(blocks), dtype, kind, mode, meta, split


def ours(bloscfs, path):
    r = subprocess.run([bloscfs, "cat", path], capture_output=True)
    if r.returncode != 0:
        return None, r.stderr.decode(errors="replace").strip()
    return np.load(io.BytesIO(r.stdout)), None


def write_and_read(p, arr, chunks, blocks, mode, meta, split):
    """In a child process (older C-Blosc2 releases overrun their buffers
    on split ZFP streams, and may crash): write the
    array, read it back, and save what the writer reads to `p.ref.npy`.
    Returns None, or why there is no reference."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            stage = "not written"
            write(p, arr, chunks, blocks, mode, meta, split)
            open(p + ".written", "w").close()
            stage = "reference fails"
            np.save(p + ".ref.npy", reference(p))
        except Exception as e:
            with open(p + ".err", "w") as f:
                f.write(f"{stage}: {e}")
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    written = os.path.exists(p + ".written")
    if written:
        os.remove(p + ".written")
    if os.WIFSIGNALED(status):
        stage = "reading it back" if written else "writing"
        return f"the writer crashed {stage} (signal {os.WTERMSIG(status)})"
    if os.WEXITSTATUS(status) != 0:
        with open(p + ".err") as f:
            return f.read()
    return None


def sweep(n, bloscfs, seed):
    blosc2.set_nthreads(1)
    rng = np.random.default_rng(seed)
    counts = {"identical": 0, "differ": 0, "we fail": 0, "no reference": 0}
    # Arrays stored in under 90% of their size: ZFP streams were decoded (a
    # block ZFP does not shrink is stored raw, not ZFP-coded).
    coded = 0
    split_refused = 0
    by = {}
    with tempfile.TemporaryDirectory() as d:
        for i in range(n):
            shape, chunks, blocks, dtype, kind, mode, meta, split = random_case(rng)
            arr = values(shape, dtype, kind, rng)
            p = os.path.join(d, f"{i}.b2nd")
            desc = f"{i}: {mode} meta {meta} {dtype} shape {shape} chunks {chunks} blocks {blocks} {kind} split {split}"
            why = write_and_read(p, arr, chunks, blocks, mode, meta, split)
            got, err = ours(bloscfs, p) if os.path.exists(p) else (None, "no file")
            if why is not None:
                counts["no reference"] += 1
                print(f"no reference: {desc}: {why}; bloscfs: {err or 'read it'}")
                continue
            ref = np.load(p + ".ref.npy")
            key = (mode, dtype, len(shape))
            by.setdefault(key, [0, 0])
            by[key][1] += 1
            if got is None:
                counts["we fail"] += 1
                if "split into" in err:
                    split_refused += 1
                print("we fail:", desc, err)
            elif got.dtype == ref.dtype and got.shape == ref.shape and got.tobytes() == ref.tobytes():
                counts["identical"] += 1
                by[key][0] += 1
                opened = blosc2.open(p)
                sc = opened.schunk
                coded += sc.cbytes < 0.9 * sc.nbytes
            else:
                counts["differ"] += 1
                print("differ:", desc)
    print(f"python-blosc2 {blosc2.__version__}, seed {seed}: {n} cases: {counts}")
    print(f"  identical and stored in under 90% of their size (ZFP-coded): {coded}")
    print(f"  we fail: blocks split into ZFP streams refused (as python-blosc2 4.14 does): {split_refused}")
    for k in sorted(by):
        print(f"  {k[0]:4} {k[1]} {k[2]}d: {by[k][0]}/{by[k][1]} identical")
    return counts, split_refused


if __name__ == "__main__":
    if sys.argv[1:2] == ["fixtures"]:
        fixtures()
    elif sys.argv[1:2] == ["sweep"]:
        seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
        c, split_refused = sweep(int(sys.argv[2]), sys.argv[3], seed)
        sys.exit(1 if c["differ"] or c["we fail"] > split_refused else 0)
    else:
        sys.exit(__doc__)
