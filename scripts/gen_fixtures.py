#!/usr/bin/env python3
"""Write the reference fixture matrix with the reference producers.

    gen_fixtures.py OUTDIR [--full]

Every fixture is written by python-blosc2 (C-Blosc2), python-blosc (C-Blosc1)
or bloscpack, except where no producer writes the format any more (Blosc1
snappy chunks, the pre-release packed super-chunk): those are assembled here
from streams and chunks the reference libraries produce. OUTDIR/manifest.json
lists, for each fixture, what bloscfs must present: its length and SHA-256,
computed from the *reference library's own* decompression (for arrays: what
numpy.save writes for the array the reference library returns).

Without --full a small, deterministic subset is written (it is committed in
tests/fixtures so `cargo test` works offline); --full writes the whole
matrix (CI).
"""

import collections
import collections.abc
import hashlib
import io
import json
import os
import random
import shutil
import struct
import sys

for _n in ("MutableMapping", "Mapping", "Sequence", "Iterable", "Callable", "MutableSequence"):
    setattr(collections, _n, getattr(collections.abc, _n))

import blosc  # noqa: E402
import blosc2  # noqa: E402
import bloscpack as bp  # noqa: E402
import numpy as np  # noqa: E402

OUT = None
FULL = False
MANIFEST = []
RNG = np.random.default_rng(20261122)
PICK = random.Random(7)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def record(path, expected, kind, expect="ok", **params):
    rel = os.path.relpath(path, OUT)
    entry = {"path": rel, "kind": kind, "expect": expect, "params": params}
    if expect == "ok":
        entry["len"] = len(expected)
        entry["sha256"] = sha(expected)
    MANIFEST.append(entry)


def npy_bytes(arr):
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def sample(items, k):
    """All items with --full, else a deterministic sample of k."""
    items = list(items)
    if FULL or len(items) <= k:
        return items
    return PICK.sample(items, k)


def data_for(ts, nbytes, flavour):
    """Realistic content of `nbytes` bytes for typesize `ts`."""
    n = nbytes // max(ts, 1) + 1
    if flavour == "series":
        x = np.cumsum(RNG.normal(size=n)) * 1000
        raw = x.astype("<f8").tobytes()
    elif flavour == "counter":
        raw = (np.arange(n, dtype="<i8") * 3 + 7).tobytes()
    elif flavour == "random":
        raw = RNG.integers(0, 256, size=n * ts + 16, dtype=np.uint8).tobytes()
    elif flavour == "text":
        words = [b"climate", b"detector", b"tensor", b"blosc", b"chunk", b"\n", b" "]
        raw = b" ".join(PICK.choice(words) for _ in range(nbytes // 4 + 8))
    else:  # const with a few changes
        a = np.zeros(n * ts, dtype=np.uint8)
        a[:: 997] = 3
        raw = a.tobytes()
    reps = nbytes // max(len(raw), 1) + 1
    return (raw * reps)[:nbytes]


F = blosc2.Filter
FILTER_SETS = {
    "none": [],
    "shuffle": [F.SHUFFLE],
    "bitshuffle": [F.BITSHUFFLE],
    "delta": [F.DELTA, F.SHUFFLE],
    "trunc": [F.TRUNC_PREC, F.SHUFFLE],
    "bytedelta": [F.SHUFFLE, F.BYTEDELTA],
}
CODECS2 = [blosc2.Codec.BLOSCLZ, blosc2.Codec.LZ4, blosc2.Codec.LZ4HC, blosc2.Codec.ZLIB, blosc2.Codec.ZSTD]
SPLITS = [blosc2.SplitMode.ALWAYS_SPLIT, blosc2.SplitMode.NEVER_SPLIT, blosc2.SplitMode.AUTO_SPLIT]


def filters_meta(fl, ts):
    meta = [0] * len(fl)
    for i, f in enumerate(fl):
        if f == F.TRUNC_PREC:
            meta[i] = 20 if ts == 8 else 10
        if f == F.BYTEDELTA:
            meta[i] = ts
    return meta


def blosc2_chunks():
    d = os.path.join(OUT, "chunk2")
    os.makedirs(d, exist_ok=True)
    combos = [
        (c, fname, ts, sp)
        for c in CODECS2
        for fname in FILTER_SETS
        for ts in [1, 2, 4, 8, 3, 7, 12]
        for sp in SPLITS
        if not (fname == "trunc" and ts not in (4, 8))
    ]
    for c, fname, ts, sp in sample(combos, 40):
        fl = FILTER_SETS[fname]
        flavour = PICK.choice(["series", "counter", "random", "text", "const"])
        nbytes = PICK.choice([1, 100, 4099, 65536 + 13, 200_003]) if FULL else PICK.choice([100, 4099, 30_011])
        nbytes = max(nbytes - nbytes % ts, ts) if PICK.random() < 0.5 else nbytes
        src = data_for(ts, nbytes, flavour)
        blocksize = PICK.choice([0, 4096 * ts, 1536 * ts])
        try:
            ch = blosc2.compress2(src, codec=c, filters=fl, filters_meta=filters_meta(fl, ts), typesize=ts,
                                  clevel=PICK.choice([1, 5, 9]), splitmode=sp, blocksize=blocksize)
            ref = blosc2.decompress2(ch)
        except Exception:
            continue  # the reference cannot round-trip this combination
        p = os.path.join(d, f"{c.name.lower()}-{fname}-ts{ts}-{sp.name.lower()}-{flavour}.b2")
        open(p, "wb").write(ch)
        extra = {}
        if fname == "delta" and (ref != src or nbytes % ts):
            # The encoder never writes the tail of such a block: the bytes it
            # stores there, and so what any decoder returns, are undefined.
            os.remove(p)
            continue
        if ref != src and fname in ("none", "shuffle", "bitshuffle", "bytedelta"):
            # C-Blosc2 3.3 leaves the trailing bytes of a split block whose size
            # is not a multiple of the typesize unwritten on decode (they come
            # out as whatever was in memory). The stored streams hold the
            # original bytes: the expectation is the original data.
            diff = [i for i in range(len(src)) if ref[i] != src[i]]
            assert len(diff) < ts and diff[0] >= len(src) - ts, (p, diff[:8])
            ref, extra = src, {"reference_decoder_leaves_tail_unwritten": True}
        record(p, ref, "blosc2-chunk", codec=c.name, filters=fname, typesize=ts, split=sp.name, nbytes=nbytes, **extra)


def blosc1_chunks():
    d = os.path.join(OUT, "chunk1")
    os.makedirs(d, exist_ok=True)
    combos = [(c, sh, ts) for c in ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]
              for sh in [blosc.NOSHUFFLE, blosc.SHUFFLE, blosc.BITSHUFFLE] for ts in [1, 2, 4, 8, 16, 3]]
    for c, sh, ts in sample(combos, 20):
        flavour = PICK.choice(["series", "counter", "random", "text"])
        nbytes = PICK.choice([50, 5000, 70_001, 300_000]) if FULL else PICK.choice([50, 5000, 40_001])
        src = data_for(ts, nbytes, flavour)
        ch = blosc.compress(src, typesize=ts, cname=c, shuffle=sh, clevel=PICK.choice([1, 5, 9]))
        ref = blosc.decompress(ch)
        p = os.path.join(d, f"{c}-sh{sh}-ts{ts}-{flavour}.blosc")
        open(p, "wb").write(ch)
        record(p, ref, "blosc1-chunk", codec=c, shuffle=sh, typesize=ts, nbytes=nbytes)


def snappy_chunk(src, blocksize, typesize=1):
    """A Blosc1 chunk of snappy streams (python-blosc no longer writes them):
    version 2, codec 2, don't-split, no shuffle, raw snappy blocks."""
    import cramjam
    nblocks = (len(src) + blocksize - 1) // blocksize
    streams = []
    for i in range(nblocks):
        blk = src[i * blocksize:(i + 1) * blocksize]
        comp = bytes(cramjam.snappy.compress_raw(blk))
        if len(comp) >= len(blk):
            comp = blk  # stored raw (csize == block size)
        streams.append(struct.pack("<i", len(comp)) + comp)
    hdr_len = 16 + 4 * nblocks
    bstarts, pos = [], hdr_len
    for s in streams:
        bstarts.append(pos)
        pos += len(s)
    flags = (2 << 5) | 0x10
    header = struct.pack("<BBBBiii", 2, 1, flags, typesize, len(src), blocksize, pos)
    return header + b"".join(struct.pack("<i", b) for b in bstarts) + b"".join(streams)


def snappy_chunks():
    d = os.path.join(OUT, "snappy")
    os.makedirs(d, exist_ok=True)
    import cramjam
    for i, (n, bs, flavour) in enumerate([(10_000, 4096, "text"), (65_536, 65_536, "series"), (3_001, 1024, "random")]):
        src = data_for(1, n, flavour)
        ch = snappy_chunk(src, bs)
        # Oracle: each stream decodes with the reference snappy; the whole
        # chunk must present exactly the source bytes.
        p = os.path.join(d, f"snappy-{i}-{flavour}.blosc")
        open(p, "wb").write(ch)
        assert bytes(cramjam.snappy.decompress_raw(cramjam.snappy.compress_raw(src))) == src
        record(p, src, "blosc1-chunk", codec="snappy", nbytes=n)


def frames():
    d = os.path.join(OUT, "frame")
    os.makedirs(d, exist_ok=True)
    combos = [(c, fname, ts, contiguous) for c in CODECS2 for fname in ["none", "shuffle", "bitshuffle", "delta", "bytedelta"]
              for ts in [1, 4, 8] for contiguous in [True, False]]
    for c, fname, ts, contiguous in sample(combos, 12):
        fl = FILTER_SETS[fname]
        chunksize = PICK.choice([4096, 40_000, 1 << 20]) if FULL else PICK.choice([4096, 40_000])
        chunksize -= chunksize % ts
        nbytes = chunksize * PICK.choice([1, 3, 7]) + PICK.choice([0, ts * 5, chunksize // 2 // ts * ts])
        src = data_for(ts, nbytes, PICK.choice(["series", "counter", "text"]))
        name = f"{c.name.lower()}-{fname}-ts{ts}-{'c' if contiguous else 's'}.b2frame"
        p = os.path.join(d, name)
        shutil.rmtree(p, ignore_errors=True)
        s = blosc2.SChunk(chunksize=chunksize, urlpath=p, contiguous=contiguous, mode="w",
                          cparams=dict(codec=c, filters=fl, filters_meta=filters_meta(fl, ts), typesize=ts,
                                       clevel=PICK.choice([1, 5])),
                          meta={"origin": "bloscfs-fixture", "n": nbytes})
        for i in range(0, nbytes, chunksize):
            s.append_data(src[i:i + chunksize])
        s.vlmeta["note"] = "hello"
        ref = b"".join(s.decompress_chunk(i) for i in range(s.nchunks))
        record(p, ref, "blosc2-frame" if contiguous else "blosc2-sframe", codec=c.name, filters=fname, typesize=ts,
               chunksize=chunksize, nbytes=nbytes, metalayers=["origin", "n"], vlmetalayers=["note"])
    # Special chunks: zeros, NaN, uninitialised, repeated value.
    for kind in ["ZERO", "NAN", "UNINIT", "VALUE"]:
        p = os.path.join(d, f"special-{kind.lower()}.b2frame")
        s = blosc2.SChunk(chunksize=8000, urlpath=p, mode="w", cparams=dict(typesize=8, codec=blosc2.Codec.LZ4))
        kw = {"value": np.float64(2.5)} if kind == "VALUE" else {}
        s.fill_special(2500, getattr(blosc2.SpecialValue, kind), **kw)
        ref = b"".join(s.decompress_chunk(i) for i in range(s.nchunks))
        if kind == "UNINIT":
            ref = bytes(len(ref))  # uninitialised chunks are served as zeros
        record(p, ref, "blosc2-frame", special=kind)
    # Variable chunk sizes (update/insert chunks of other sizes).
    p = os.path.join(d, "variable-chunks.b2frame")
    s = blosc2.SChunk(chunksize=4000, urlpath=p, mode="w", cparams=dict(typesize=4))
    ch = lambda n, k: blosc2.compress2((np.arange(n, dtype="<i4") * k).tobytes(), typesize=4)  # noqa: E731
    for k in range(3):
        s.append_chunk(ch(1000, k + 1))
    s.update_chunk(1, ch(300, 9))
    s.insert_chunk(0, ch(700, 5))
    ref = b"".join(s.decompress_chunk(i) for i in range(s.nchunks))
    record(p, ref, "blosc2-frame", variable=True)
    # Multi-block chunks, for tests that count decoded blocks.
    for name, fl in [("blocks-lz4", [F.SHUFFLE]), ("blocks-delta", [F.DELTA, F.SHUFFLE])]:
        p = os.path.join(d, f"{name}.b2frame")
        s = blosc2.SChunk(chunksize=1 << 20, urlpath=p, mode="w",
                          cparams=dict(typesize=8, codec=blosc2.Codec.LZ4, filters=fl, blocksize=64 << 10))
        raw = (np.arange(3 * (1 << 17) + 1000, dtype="<i8") // 7).tobytes()
        for i in range(0, len(raw), 1 << 20):
            s.append_data(raw[i:i + (1 << 20)])
        ref = b"".join(s.decompress_chunk(i) for i in range(s.nchunks))
        record(p, ref, "blosc2-frame", blocksize=64 << 10, filters=name)
    # A zstd dictionary.
    p = os.path.join(d, "zstd-dict.b2frame")
    s = blosc2.SChunk(chunksize=40_000, urlpath=p, mode="w",
                      cparams=dict(typesize=4, codec=blosc2.Codec.ZSTD, use_dict=True, clevel=5))
    raw = (np.arange(30_000, dtype="<i4") % 1000).tobytes()
    for i in range(0, len(raw), 40_000):
        s.append_data(raw[i:i + 40_000])
    ref = b"".join(s.decompress_chunk(i) for i in range(s.nchunks))
    record(p, ref, "blosc2-frame", dict=True)
    if FULL:
        # More than 4 GiB uncompressed (special zero chunks + a data chunk at the end).
        p = os.path.join(d, "big-5GiB.b2nd")
        n = 5 * 2**30 + 12345
        a = blosc2.zeros((n,), dtype="u1", chunks=(2**27,), blocks=(2**20,), urlpath=p, mode="w")
        a[n - 1000:n] = np.arange(1000) % 251
        h = hashlib.sha256()
        arr_tail = np.zeros(1000, dtype="u1")
        arr_tail[:] = np.arange(1000) % 251
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, {"descr": "|u1", "fortran_order": False, "shape": (n,)})
        hdr = buf.getvalue()
        h.update(hdr)
        zeros = bytes(64 << 20)
        left = n - 1000
        while left:
            k = min(left, len(zeros))
            h.update(zeros[:k])
            left -= k
        h.update(arr_tail.tobytes())
        MANIFEST.append({"path": os.path.relpath(p, OUT), "kind": "b2nd", "expect": "ok",
                         "params": {"big": True}, "len": len(hdr) + n, "sha256": h.hexdigest()})


def arrays():
    d = os.path.join(OUT, "b2nd")
    os.makedirs(d, exist_ok=True)
    cases = [
        ((10_007,), (1000,), (128,), "<f8"),
        ((97, 131), (40, 50), (8, 25), "<i4"),
        ((7, 11, 5), (4, 6, 3), (2, 3, 2), "<i2"),
        ((33, 17), (33, 17), (33, 17), "<c16"),
        ((5, 6, 7, 8), (3, 4, 5, 6), (2, 2, 3, 3), "|u1"),
        ((3, 4, 3, 4, 3), (2, 2, 2, 2, 2), (1, 2, 1, 2, 2), "|b1"),
        ((2, 3, 2, 3, 2, 3), (2, 2, 2, 2, 2, 2), (1, 1, 2, 2, 1, 2), "<f4"),
        ((2, 2, 2, 3, 2, 2, 3), (2, 1, 2, 2, 2, 1, 2), (1, 1, 1, 2, 2, 1, 1), "<u8"),
        ((2, 3, 2, 2, 2, 3, 2, 2), (1, 2, 2, 1, 2, 2, 1, 2), (1, 1, 1, 1, 2, 1, 1, 2), "<i8"),
        ((301,), (64,), (16,), "|S5"),
        ((40, 3), (16, 2), (4, 2), "<U3"),
        ((50,), (16,), (4,), [("a", "<i4"), ("b", "<f8", (2,)), ("c", "S3")]),
        ((1000, 1000), (250, 300), (50, 100), "<f8"),
        ((), (), (), "<f8"),
    ]
    if not FULL:
        cases = [c for c in cases if np.prod(c[0] or (1,)) < 300_000]
    for i, (shape, chunks, blocks, dt) in enumerate(cases):
        dt = np.dtype(dt)
        n = int(np.prod(shape)) if shape else 1
        if dt.kind == "f":
            arr = (np.cumsum(RNG.normal(size=n)) * 10).astype(dt)
        elif dt.kind == "c":
            arr = (RNG.normal(size=n) + 1j * RNG.normal(size=n)).astype(dt)
        elif dt.kind == "b":
            arr = RNG.integers(0, 2, size=n).astype(dt)
        elif dt.kind in "iu":
            arr = (np.arange(n) % 200).astype(dt)
        elif dt.kind == "S":
            arr = np.array([b"ab%d" % (k % 1000) for k in range(n)], dtype=dt)
        elif dt.kind == "U":
            arr = np.array(["x%d" % (k % 99) for k in range(n)], dtype=dt)
        else:
            arr = np.zeros(n, dtype=dt)
            arr["a"] = np.arange(n)
            arr["b"][:, 1] = 0.5
            arr["c"] = b"xyz"
        arr = arr.reshape(shape)
        p = os.path.join(d, f"array{i}-{len(shape)}d.b2nd")
        kw = dict(chunks=chunks, blocks=blocks) if shape else {}
        b = blosc2.asarray(arr, urlpath=p, mode="w", **kw)
        ref = blosc2.open(p)[()] if not shape else blosc2.open(p)[...]
        ref = np.asarray(ref)
        assert ref.dtype == arr.dtype
        record(p, npy_bytes(ref), "b2nd", shape=list(shape), chunks=list(chunks), blocks=list(blocks), dtype=str(dt))
    # Partially written array: unwritten chunks are special zeros.
    p = os.path.join(d, "partial.b2nd")
    a = blosc2.zeros((100_000,), dtype="f8", chunks=(10_000,), blocks=(1000,), urlpath=p, mode="w")
    a[25_000:37_000] = np.arange(12_000)
    record(p, npy_bytes(blosc2.open(p)[...]), "b2nd", partial=True)


def bloscpacks():
    d = os.path.join(OUT, "bloscpack")
    os.makedirs(d, exist_ok=True)
    checks = ["None", "adler32", "crc32", "md5", "sha1", "sha224", "sha256", "sha384", "sha512"]
    combos = [(ck, off, c, ts) for ck in checks for off in [True, False]
              for c in ["blosclz", "lz4", "zlib", "zstd"] for ts in [1, 2, 4, 8]]
    chosen = sample(combos, 14)
    # Every checksum at least once, with and without offsets.
    for ck in checks:
        chosen.append((ck, checks.index(ck) % 2 == 0, "lz4", 4))
    for k, (ck, off, c, ts) in enumerate(chosen):
        n = PICK.choice([1000, 50_000, 300_001]) if FULL else PICK.choice([1000, 20_000])
        src = data_for(ts, n, PICK.choice(["series", "counter", "text"]))
        chunk = PICK.choice([4096, 16_384, 1_000_000])
        p = os.path.join(d, f"bytes-{k}-{ck}-{'off' if off else 'nooff'}-{c}-ts{ts}.blp")
        bp.pack_bytes_to_file(src, p, chunk_size=chunk,
                              blosc_args=bp.BloscArgs(typesize=ts, cname=c, clevel=5, shuffle=ts > 1),
                              bloscpack_args=bp.BloscpackArgs(offsets=off, checksum=ck,
                                                              max_app_chunks=PICK.choice([0, 3])))
        ref, _meta = bp.unpack_bytes_from_file(p)
        record(p, ref, "bloscpack", checksum=ck, offsets=off, codec=c, typesize=ts, chunk_size=chunk)
    # NumPy arrays (metadata, C and Fortran order, compressed metadata).
    arrs = [
        np.arange(100_000, dtype="<f8").reshape(1000, 100),
        np.asfortranarray((np.arange(60_000, dtype="<i4") % 977).reshape(200, 300)),
        np.zeros(10, dtype=[("a", "<i4"), ("b", "<f8", (2,))]),
        np.array([b"abc", b"de", b"f"] * 333, dtype="S3"),
    ]
    for k, a in enumerate(arrs):
        p = os.path.join(d, f"ndarray-{k}.blp")
        bp.pack_ndarray_to_file(a, p, chunk_size=PICK.choice([8192, 65536]),
                                bloscpack_args=bp.BloscpackArgs(checksum=checks[(k * 2 + 1) % 9]))
        ref = bp.unpack_ndarray_from_file(p)
        record(p, npy_bytes(ref), "bloscpack-ndarray", order="F" if a.flags.f_contiguous and a.ndim > 1 else "C",
               dtype=str(a.dtype))


def packed():
    """Pre-release packed super-chunks, assembled from real C-Blosc2 chunks
    behind a header laid out as the specification's diagram says."""
    d = os.path.join(OUT, "packed")
    os.makedirs(d, exist_ok=True)
    for k, (codec, nchunks) in enumerate([(blosc2.Codec.LZ4, 3), (blosc2.Codec.ZSTD, 1), (blosc2.Codec.BLOSCLZ, 5)]):
        chunksize = 16_000
        chunks, ref = [], b""
        for i in range(nchunks):
            n = chunksize if i < nchunks - 1 else chunksize // 2 + 8
            src = data_for(8, n, "series")
            c = blosc2.compress2(src, codec=codec, typesize=8, filters=[F.SHUFFLE])
            chunks.append(c)
            ref += blosc2.decompress2(c)
        body, pos = b"", 96
        starts = []
        for c in chunks:
            starts.append(pos)
            body += c
            pos += len(c)
        ds = pos
        table = b"".join(struct.pack("<q", s) for s in starts)
        total = ds + len(table)
        hdr = struct.pack("<BBBBHHHHI", 3, 0, 0, 0, {0: 0, 1: 1, 5: 4}[codec.value], 5, 1, 0, chunksize)
        hdr += struct.pack("<QQQ", nchunks, 96 + len(ref), total)
        hdr += struct.pack("<qqqqqqq", 0, 0, 0, 0, ds, 0, 0)
        assert len(hdr) == 96
        p = os.path.join(d, f"packed-{k}.b2pack")
        open(p, "wb").write(hdr + body + table)
        record(p, ref, "blosc2-packed", codec=codec.name, nchunks=nchunks)


def errors():
    """Files that look like containers but are damaged: a clear error."""
    d = os.path.join(OUT, "bad")
    os.makedirs(d, exist_ok=True)
    good = blosc2.compress2(data_for(8, 50_000, "series"), codec=blosc2.Codec.LZ4, typesize=8, blocksize=8192)
    ch = bytearray(good)
    ch[0] = 9  # unknown version -> not a chunk at all
    open(os.path.join(d, "not-a-chunk.bin"), "wb").write(ch)
    MANIFEST.append({"path": "bad/not-a-chunk.bin", "kind": "none", "expect": "not-container", "params": {}})
    ch = bytearray(good)
    ch[22] = 99  # flags say user codec (compcode 6) below
    ch[2] = (ch[2] & 0x1F) | (6 << 5)
    p = os.path.join(d, "user-codec.b2")
    open(p, "wb").write(ch)
    record(p, b"", "blosc2-chunk", expect="error", reason="unsupported codec")
    ch = bytearray(good)
    ch[16] = 200  # unknown filter id in slot 0
    p = os.path.join(d, "unknown-filter.b2")
    open(p, "wb").write(ch)
    record(p, b"", "blosc2-chunk", expect="error", reason="unsupported filter")


def main():
    global OUT, FULL
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    FULL = "--full" in sys.argv
    if len(args) != 1:
        sys.exit(__doc__)
    OUT = os.path.abspath(args[0])
    os.makedirs(OUT, exist_ok=True)
    for step in [blosc2_chunks, blosc1_chunks, snappy_chunks, frames, arrays, bloscpacks, packed, errors]:
        step()
    versions = {"blosc2": blosc2.__version__, "c-blosc2": blosc2.blosclib_version, "blosc": blosc.__version__,
                "bloscpack": bp.__version__, "numpy": np.__version__}
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"producers": versions, "full": FULL, "fixtures": MANIFEST}, f, indent=1)
    print(f"{len(MANIFEST)} fixtures written to {OUT}")


if __name__ == "__main__":
    main()
