#!/usr/bin/env python3
"""Write small Blosc2 frames, sparse frames and b2nd arrays to tests/data/frame/
with a manifest of what python-blosc2 says they contain.

Run with the project venv:  .venv/bin/python scripts/gen_frame_fixtures.py

The expected content of every container is the concatenation of
`schunk.decompress_chunk(i)` over its chunks (the raw frame content; for b2nd
arrays that is the padded chunk-by-chunk layout, not the array in C order).
Uninitialised special chunks are expected as zeros (bloscfs serves them so).
"""

import hashlib
import json
import os
import shutil
import struct

import blosc2
import msgpack
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "frame")
C = blosc2.Codec
F = blosc2.Filter
SV = blosc2.SpecialValue
MANIFEST = []


def path(name):
    p = os.path.join(OUT, name)
    if os.path.isdir(p):
        shutil.rmtree(p)
    elif os.path.exists(p):
        os.remove(p)
    return p


def raw_offsets(p):
    """Decoded int64 offsets of a contiguous frame or a sframe index (for checks)."""
    idx = os.path.join(p, "chunks.b2frame") if os.path.isdir(p) else p
    b = open(idx, "rb").read()
    hl = struct.unpack(">i", b[11:15])[0]
    cb = struct.unpack(">q", b[39:47])[0]
    nbytes = struct.unpack(">q", b[30:38])[0]
    if nbytes == 0:
        return []  # an empty frame has no offsets chunk
    at = hl if os.path.isdir(p) else hl + cb
    n = struct.unpack("<i", b[at + 12:at + 16])[0]
    return [int(x) for x in np.frombuffer(blosc2.decompress(b[at:at + n]), "<i8")]


def record(name, s, uninit=(), ref=None, **params):
    """Record `s` (an open SChunk or NDArray's schunk) written at tests/data/frame/name.
    `ref`: the expected content, where python-blosc2 cannot read it back."""
    p = os.path.join(OUT, name)
    if ref is None:
        parts = []
        for i in range(s.nchunks):
            c = s.decompress_chunk(i)
            if i in uninit:
                c = bytes(len(c))
            parts.append(c)
        ref = b"".join(parts)
    assert len(ref) == s.nbytes, (name, len(ref), s.nbytes)
    entry = {
        "path": name,
        "expect": "ok",
        "kind": "sframe" if os.path.isdir(p) else "frame",
        "len": len(ref),
        "sha256": hashlib.sha256(ref).hexdigest(),
        "nchunks": s.nchunks,
        "typesize": s.typesize,
        "chunksize": s.chunksize,
        "metalayers": sorted(s.meta.keys()),
        # python-blosc2 stores a user metalayer as msgpack of its value.
        "metavalues": {k: msgpack.packb(s.meta[k]).hex() for k in s.meta.keys() if k != "b2nd"},
        "vlmetalayers": {k: msgpack.packb(v).hex() for k, v in s.vlmeta.getall().items()},
        "offsets": raw_offsets(p),
    }
    entry.update(params)  # may override "expect"
    MANIFEST.append(entry)


def ints(n, k=1, dt="<i4"):
    return ((np.arange(n, dtype=np.int64) * k) % 1000).astype(dt).tobytes()


def schunk(name, contiguous=True, **kw):
    return blosc2.SChunk(urlpath=path(name), contiguous=contiguous, mode="w", **kw)


def fixed():
    # Fixed chunk size with a short last chunk, metalayers and vlmetalayers, one file per codec.
    for codec, ts, fl in [(C.LZ4, 4, [F.SHUFFLE]), (C.BLOSCLZ, 8, [F.SHUFFLE]), (C.LZ4HC, 2, [F.BITSHUFFLE]),
                          (C.ZLIB, 4, [F.DELTA, F.SHUFFLE]), (C.ZSTD, 4, [F.SHUFFLE])]:
        name = f"fixed-{codec.name.lower()}.b2frame"
        s = schunk(name, chunksize=4000, meta={"origin": "bloscfs", "dims": [3, 4]},
                   cparams=dict(codec=codec, typesize=ts, filters=fl, clevel=5))
        data = ints(2500, 3)  # 10,000 bytes: two full chunks and a short one
        for i in range(0, len(data), 4000):
            s.append_data(data[i:i + 4000])
        s.vlmeta["note"] = "hello"
        s.vlmeta["list"] = [1, 2, 3]
        record(name, s, codec=codec.name.lower())


def variable():
    # Differently sized appends: the frame turns variable (version 3, chunksize 0).
    name = "variable-append.b2frame"
    s = schunk(name, chunksize=4000, cparams=dict(codec=C.LZ4, typesize=4))
    s.append_data(ints(1000, 1))
    s.append_data(ints(500, 2))
    s.append_data(ints(1000, 5))
    s.append_data(ints(1, 7))
    record(name, s, variable=True)
    # Chunk-level edits: insert, update, delete chunks of other sizes.
    name = "variable-edits.b2frame"
    s = schunk(name, chunksize=4000, cparams=dict(codec=C.ZSTD, typesize=4))
    ch = lambda n, k: blosc2.compress2(ints(n, k), typesize=4, codec=C.LZ4)  # noqa: E731
    for k in range(4):
        s.append_chunk(ch(1000, k + 1))
    s.update_chunk(1, ch(300, 9))
    s.insert_chunk(0, ch(700, 5))
    s.delete_chunk(3)
    record(name, s, variable=True)
    # A zero chunk in a variable frame is stored as a special offset without
    # its size; C-Blosc2 cannot read it back (error in the open SChunk,
    # SIGFPE on reopening), so the expected content is the appended data.
    # One special chunk: its size is what nbytes leaves. Two: an error.
    name = "variable-special.b2frame"
    s = schunk(name, chunksize=4000, cparams=dict(codec=C.LZ4, typesize=4))
    parts = [ints(1000, 1), ints(500, 2), bytes(1200), ints(200, 3)]
    for d in parts:
        s.append_data(d)
    assert raw_offsets(os.path.join(OUT, name))[2] < 0
    record(name, s, ref=b"".join(parts), variable=True)
    name = "variable-2special.b2frame"
    s = schunk(name, chunksize=4000, cparams=dict(codec=C.LZ4, typesize=4))
    parts = [ints(1000, 1), bytes(1200), bytes(2000)]
    for d in parts:
        s.append_data(d)
    record(name, s, ref=b"".join(parts), variable=True, expect="error")


def edits():
    # Fixed size, with dead space in the data area after delete/insert/update.
    name = "edited.b2frame"
    s = schunk(name, chunksize=4000, cparams=dict(codec=C.LZ4, typesize=4))
    for k in range(5):
        s.append_data(ints(1000, k + 1))
    s.delete_chunk(1)
    s.insert_data(0, ints(1000, 11), copy=True)
    s.update_data(2, ints(1000, 13), copy=True)
    record(name, s)


def specials():
    # Offsets with the special bit: a zero chunk appended, fill_special of each kind.
    name = "special-mixed.b2frame"
    s = schunk(name, chunksize=4000, cparams=dict(codec=C.LZ4, typesize=4))
    s.append_data(ints(1000, 1))
    s.append_data(bytes(4000))
    s.append_data(np.full(1000, np.nan, dtype="<f4").tobytes())
    s.append_data(np.full(1000, 7, dtype="<i4").tobytes())
    s.append_data(bytes(1200))
    record(name, s)
    for kind, ts, n in [("ZERO", 8, 1234), ("NAN", 4, 2500), ("NAN", 8, 1100), ("UNINIT", 4, 2001), ("VALUE", 8, 1100)]:
        name = f"fill-{kind.lower()}-ts{ts}.b2frame"
        s = schunk(name, chunksize=4000, cparams=dict(codec=C.LZ4, typesize=ts))
        kw = {"value": np.float64(2.5)} if kind == "VALUE" else {}
        s.fill_special(n, getattr(SV, kind), **kw)
        record(name, s, uninit=range(s.nchunks) if kind == "UNINIT" else ())


def empty():
    name = "empty.b2frame"
    s = schunk(name, chunksize=4000, cparams=dict(codec=C.LZ4, typesize=4))
    record(name, s)
    name = "empty-vlmeta.b2frame"
    s = schunk(name, chunksize=4000, meta={"m": 1}, cparams=dict(codec=C.LZ4, typesize=4))
    s.vlmeta["x"] = "y"
    record(name, s)


def many():
    name = "many-chunks.b2frame"
    s = schunk(name, chunksize=64, cparams=dict(codec=C.LZ4, typesize=4, blocksize=64))
    data = ints(16 * 3000 + 5, 1)
    for i in range(0, len(data), 64):
        s.append_data(data[i:i + 64])
    record(name, s)


def sparse():
    name = "sparse-fixed.b2frame"
    s = schunk(name, contiguous=False, chunksize=4000, meta={"origin": "sparse"},
               cparams=dict(codec=C.ZSTD, typesize=4))
    for k in range(4):
        s.append_data(ints(1000, k + 2))
    s.append_data(ints(300, 9))
    s.vlmeta["note"] = "sparse"
    record(name, s)
    # Out-of-order chunk numbers, a special chunk, variable sizes.
    name = "sparse-edits.b2frame"
    s = schunk(name, contiguous=False, chunksize=4000, cparams=dict(codec=C.LZ4, typesize=4))
    for k in range(4):
        s.append_data(ints(1000, k + 2))
    s.append_data(bytes(4000))
    s.delete_chunk(1)
    s.insert_data(0, ints(1000, 17), copy=True)
    s.update_data(3, ints(1000, 19), copy=True)
    record(name, s)
    name = "sparse-variable.b2frame"
    s = schunk(name, contiguous=False, chunksize=4000, cparams=dict(codec=C.LZ4, typesize=4))
    s.append_data(ints(1000, 1))
    s.append_data(ints(10, 2))
    s.append_data(ints(777, 3))
    record(name, s, variable=True)
    name = "sparse-fill.b2frame"
    s = schunk(name, contiguous=False, chunksize=4000, cparams=dict(codec=C.LZ4, typesize=4))
    s.fill_special(2500, SV.ZERO)
    record(name, s)


def arrays():
    cases = [
        ("b2nd-1d.b2nd", (1001,), (300,), (64,), "<f8"),
        ("b2nd-2d.b2nd", (37, 21), (16, 8), (4, 8), "<i4"),
        ("b2nd-3d.b2nd", (7, 11, 5), (4, 6, 3), (2, 3, 2), "<i2"),
        ("b2nd-bool.b2nd", (50,), (16,), (8,), "|b1"),
        ("b2nd-str.b2nd", (9, 4), (4, 4), (2, 2), "<U5"),
        ("b2nd-struct.b2nd", (40,), (16,), (4,), [("a", "<i4"), ("b", "<f8")]),
    ]
    for name, shape, chunks, blocks, dt in cases:
        dt = np.dtype(dt)
        n = int(np.prod(shape))
        if dt.kind == "b":
            arr = (np.arange(n) % 3 == 0)
        elif dt.kind == "U":
            arr = np.array(["s%d" % k for k in range(n)], dtype=dt)
        elif dt.kind == "V":
            arr = np.zeros(n, dtype=dt)
            arr["a"] = np.arange(n)
            arr["b"] = np.arange(n) / 4
        else:
            arr = (np.arange(n) % 251).astype(dt)
        arr = arr.reshape(shape)
        a = blosc2.asarray(arr, urlpath=path(name), mode="w", chunks=chunks, blocks=blocks)
        a2 = blosc2.open(os.path.join(OUT, name))
        assert (a2[...] == arr).all()
        record(name, a.schunk, b2nd=dict(shape=list(shape), chunks=list(chunks), blocks=list(blocks),
                                          dtype=dt.descr[0][1] if dt.names is None else str(dt.descr)))
    name = "b2nd-zeros-2d.b2nd"
    a = blosc2.zeros((30, 40), dtype="<f4", chunks=(16, 16), blocks=(8, 8), urlpath=path(name), mode="w")
    a[3:9, 5:30] = 1.5
    record(name, a.schunk, b2nd=dict(shape=[30, 40], chunks=[16, 16], blocks=[8, 8], dtype="<f4"))
    name = "b2nd-sparse.b2nd"
    a = blosc2.asarray(np.arange(100, dtype="<i8").reshape(10, 10), chunks=(4, 4), blocks=(2, 2),
                       urlpath=path(name), mode="w", contiguous=False)
    record(name, a.schunk, b2nd=dict(shape=[10, 10], chunks=[4, 4], blocks=[2, 2], dtype="<i8"))


def main():
    os.makedirs(OUT, exist_ok=True)
    for step in [fixed, variable, edits, specials, empty, many, sparse, arrays]:
        step()
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"blosc2": blosc2.__version__, "c_blosc2": blosc2.blosclib_version, "files": MANIFEST}, f,
                  indent=1)
        f.write("\n")
    total = 0
    for dp, _, fs in os.walk(OUT):
        total += sum(os.path.getsize(os.path.join(dp, x)) for x in fs)
    print(f"{len(MANIFEST)} containers, {total} bytes in {OUT}")


if __name__ == "__main__":
    main()
