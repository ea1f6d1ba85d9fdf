#!/usr/bin/env python3
"""b2nd arrays of every dtype form writers store, for tests/fs/npy_writers.rs.

    python scripts/writers/dtype.py tests/fixtures/writers/dtype

Run it once with each python-blosc2 release the fixtures come from (each in
its own venv; blosc2 2.x needs numpy 1.x):

    /work/venvs/b2-2.2.9/bin/python  scripts/writers/dtype.py tests/fixtures/writers/dtype
    /work/venvs/b2-3.0.0/bin/python  scripts/writers/dtype.py tests/fixtures/writers/dtype
    /work/venvs/b2-4.0.0/bin/python  scripts/writers/dtype.py tests/fixtures/writers/dtype
    .venv/bin/python                 scripts/writers/dtype.py tests/fixtures/writers/dtype

A run writes `b2-VERSION/*.b2nd` and `b2-VERSION/manifest.json`, and
`descrs-numpy-VERSION.json` (and, where bloscpack is installed, a few of the
same arrays packed by it in `bloscpack-VERSION/`). The manifest says, for each array, what bloscfs
must present: its name (`NAME.npy`, or the source name when the dtype has no
`.npy` form), length and SHA-256. The expectation is the writer's own
decoding: `numpy.save` of `blosc2.open(path)[...]`, or that array's C-order
bytes for a dtype `numpy.save` cannot write. The descrs table holds, for
dtypes in every form python-blosc2 stores (`str(dtype)` for structured and
void dtypes, `dtype.str` for the others) and bloscpack stores
(`repr(dtype.descr)`), the `.npy` header `numpy.save` writes for a `(3,)`
array, or null where it writes none that loads back as the same dtype.
"""

import ast
import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
import warnings

import blosc2
import numpy as np

warnings.simplefilter("ignore")
OUT = sys.argv[1]
VER = blosc2.__version__
SUB = f"b2-{VER}"
RNG = np.random.default_rng(18)
MANIFEST = []

# Written with blosc2.empty + a slice assignment: the metalayer holds what the
# library makes of the dtype itself (`str(dtype)` for kind 'V').
SCALARS = ["?", "b", "B", "<i4", ">i2", "<u8", "<f2", ">f8", "<c8", "<c16", "|S5", "<U3",
           "<M8[ns]", "<m8[s]", "|V8"]
STRUCTS = {
    "bool-field": [("a", "<i4"), ("flag", "?")],
    "every-kind": [("x", "<f4", (2, 3)), ("n", [("p", "S3"), ("q", ">i2")]), ("u", "<U3"),
                   ("t", "<M8[ns]"), ("c", "<c16"), ("v", "V8"), ("b", "b"), ("B", "B"),
                   ("z", "<m8[10ms]"), ("h", "<f2"), ("ok", "?")],
    "nested-subarrays": [("a", ("<i4", (2,)), (3,)), ("n", [("p", "S3"), ("f", "?")], (2,))],
    "names": [("\u00e9t\u00e9", "<i4"), ("it's", "<i2"), ("\u4e00", "u1")],
    "aligned": np.dtype([("a", "u1"), ("b", "<f8"), ("c", "?")], align=True),
    "gaps": np.dtype({"names": ["a", "b"], "formats": ["u1", ("<f4", (2, 3))],
                      "offsets": [0, 4], "itemsize": 32}),
    "titled": np.dtype({"names": ["a"], "formats": ["<i4"], "titles": ["T"],
                        "offsets": [4], "itemsize": 12}),
    # Out of order: numpy.save cannot write it, so no .npy.
    "out-of-order": np.dtype({"names": ["a", "b"], "formats": ["<i4", "<f8"],
                              "offsets": [8, 0], "itemsize": 16}),
}


def npy_bytes(arr):
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def leaves(dt, base=0):
    """(byte offset, dtype) of every plain item inside one item of `dt`."""
    if dt.subdtype is not None:
        sub, shape = dt.subdtype
        for k in range(int(np.prod(shape))):
            yield from leaves(sub, base + k * sub.itemsize)
    elif dt.names is not None:
        for name in dt.names:
            sub, off = dt.fields[name][:2]
            yield from leaves(sub, base + off)
    else:
        yield base, dt


def data(dt, shape):
    """Deterministic content in every byte: bools 0 or 1, text printable."""
    dt = np.dtype(dt)
    n = int(np.prod(shape))
    raw = RNG.integers(0, 256, size=(n, dt.itemsize), dtype=np.uint8)
    for off, leaf in leaves(dt):
        if leaf.kind == "b":
            raw[:, off] &= 1
        elif leaf.kind in "SU":
            width = 4 if leaf.kind == "U" else 1
            for c in range(0, leaf.itemsize, width):
                raw[:, off + c : off + c + width] = 0
                raw[:, off + c] = RNG.integers(0x20, 0x7F, size=n, dtype=np.uint8)
    return raw.reshape(-1).view(dt).reshape(shape) if n else np.zeros(shape, dt)


def same_values(a, b):
    """Equal in every byte a field covers (numpy.load drops padding bytes)."""
    used = np.zeros(a.dtype.itemsize, bool)
    for off, leaf in leaves(a.dtype):
        used[off : off + leaf.itemsize] = True
    rows = lambda x: np.frombuffer(x.tobytes(), np.uint8).reshape(-1, x.dtype.itemsize)
    return np.array_equal(rows(a)[:, used], rows(b)[:, used])


def expect(path, presented, npy, written, why):
    got = blosc2.open(path)[...]
    # The writer's own decoding is the expectation; check it is what was written.
    assert got.tobytes() == written.tobytes(), path
    body = npy_bytes(got) if npy else got.tobytes()
    if npy:
        back = np.load(io.BytesIO(body))
        assert back.dtype == got.dtype and same_values(back, got), path
    record(path, presented, npy, body, why, meta=stored_dtype(path))


def stored_dtype(path):
    arr = blosc2.open(path)  # kept alive while its metalayer is read
    return arr.schunk.meta["b2nd"][-1]


def record(path, presented, npy, body, why, meta):
    MANIFEST.append({
        "path": os.path.relpath(path, OUT), "presented": presented, "npy": npy,
        "len": len(body), "sha256": hashlib.sha256(body).hexdigest(),
        "dtype": meta, "why": why, "writer": f"python-blosc2 {VER}",
    })


def write(name, dt, shape, chunks, blocks, how, why):
    path = os.path.join(OUT, SUB, f"{name}.b2nd")
    arr = data(dt, shape)
    try:
        if how == "asarray":
            blosc2.asarray(arr, urlpath=path, mode="w", chunks=chunks, blocks=blocks)
        else:
            b = blosc2.empty(shape, dtype=arr.dtype, urlpath=path, mode="w",
                             chunks=chunks, blocks=blocks)
            if arr.size:
                b[...] = arr
        stored = blosc2.open(path).dtype
    except Exception as e:  # an older release that cannot write (or read back) this dtype
        print(f"{VER}: {name}: not written ({type(e).__name__}: {e})")
        if os.path.exists(path):
            os.remove(path)
        return
    npy = name != "out-of-order"
    expect(path, f"{name}.npy" if npy else f"{name}.b2nd", npy,
           arr if stored == arr.dtype else arr.view(stored), why)


def mismatched(name, shape, chunks, blocks, fake):
    """A '<f4' array whose b2nd metalayer is rewritten (blosc2's own metalayer
    API, same length) to say `fake`: the frame's typesize stays 4. Oracle:
    python-blosc2 reading a copy whose metalayer says '|V4'."""
    path = os.path.join(OUT, SUB, f"{name}.b2nd")
    arr = data("<f4", shape)
    blosc2.asarray(arr, urlpath=path, mode="w", chunks=chunks, blocks=blocks)

    def relabel(p, old, new):
        a = blosc2.open(p, mode="a")  # kept alive: it owns the schunk
        raw = blosc2.blosc2_ext.meta__getitem__(a.schunk, "b2nd")
        assert raw.count(old) == 1 and len(old) == len(new)
        blosc2.blosc2_ext.meta__setitem__(a.schunk, "b2nd", raw.replace(old, new))
        del a

    relabel(path, b"<f4", fake.encode())
    with tempfile.TemporaryDirectory() as d:
        oracle = os.path.join(d, "v4.b2nd")
        shutil.copy(path, oracle)
        relabel(oracle, fake.encode(), b"|V4")
        got = blosc2.open(oracle)[...]
        assert got.dtype == np.dtype("V4") and got.tobytes() == arr.tobytes()
        body = npy_bytes(got)
    record(path, f"{name}.npy", True, body, f"metalayer {fake!r}, typesize 4: every byte as '|V4'",
           meta=stored_dtype(path))


def bloscpack_arrays():
    """The same structured dtypes packed by bloscpack (its metadata holds
    `repr(dtype.descr)`), when bloscpack is installed: OUT/bloscpack-VERSION."""
    import collections
    import collections.abc

    for n in ("MutableMapping", "Mapping", "Sequence", "Iterable", "Callable"):
        setattr(collections, n, getattr(collections.abc, n))
    try:
        import bloscpack as bp
    except ImportError:
        return
    sub = f"bloscpack-{bp.__version__}"
    shutil.rmtree(os.path.join(OUT, sub), ignore_errors=True)
    os.makedirs(os.path.join(OUT, sub))
    entries = []
    for name in ["bool-field", "every-kind", "nested-subarrays", "names", "aligned", "gaps"]:
        path = os.path.join(OUT, sub, f"{name}.blp")
        arr = data(STRUCTS[name], (7, 5))
        bp.pack_ndarray_to_file(arr, path, chunk_size=arr.dtype.itemsize * 8)
        got = bp.unpack_ndarray_from_file(path)
        assert same_values(got.view(arr.dtype), arr) if got.dtype.itemsize == arr.dtype.itemsize else False
        body = npy_bytes(got)
        entries.append({
            "path": os.path.relpath(path, OUT), "presented": f"{name}.npy", "npy": True,
            "len": len(body), "sha256": hashlib.sha256(body).hexdigest(),
            "dtype": repr(arr.dtype.descr), "why": "bloscpack metadata",
            "writer": f"bloscpack {bp.__version__}",
        })
    with open(os.path.join(OUT, sub, "manifest.json"), "w") as f:
        json.dump({"writer": f"bloscpack {bp.__version__}", "numpy": np.__version__,
                   "fixtures": entries}, f, indent=1, ensure_ascii=False)


def descr_table():
    """How numpy.save writes the descr of each stored dtype text."""
    dts = [np.dtype(s) for s in SCALARS + ["<f16", "<c32", "<M8", "<M8[10ms]", ">U2", "|S1",
                                           "<m8[us]", "u1", "i1"]]
    dts += [np.dtype(d) for d in STRUCTS.values()]
    dts += [np.dtype([("", "<i4"), ("", "<f8")]), np.dtype([("a", [])]),
            np.dtype([("a", "V0"), ("b", "i1")]), np.dtype([("s", "S3")] * 1),
            np.dtype([(("title", "a"), "<i4"), ("b", "<f8", (2, 2, 1))]),
            np.dtype([("a", "u1"), ("b", "<i4")], align=True),
            np.dtype([("a", [("b", [("c", "<i2", (1,))])])]),
            np.dtype({"names": ["a"], "formats": ["<i4"], "offsets": [2]}),
            np.dtype({"names": [""], "formats": ["<i4"], "offsets": [0]}),
            np.dtype({"names": ["a", "b"], "formats": ["<i4", "<i4"], "offsets": [0, 2]}),
            np.dtype([("nul\x00tab\t", "<i4"), ("\\back", "u1"), ("q\"'", "u1"),
                      ("\u00a0nbsp", "u1")])]
    rows = []
    for dt in dts:
        texts = {str(dt) if dt.kind == "V" else dt.str}
        if dt.names is not None and dt.itemsize < 1000:
            try:
                texts.add(repr(dt.descr))
            except ValueError:
                pass
        for text in sorted(texts):
            try:
                parsed = np.dtype(text)
            except (TypeError, ValueError):
                parsed = np.dtype(ast.literal_eval(text))
            row = {"text": text, "itemsize": parsed.itemsize, "header": None}
            try:
                body = npy_bytes(np.zeros(3, parsed))
                if np.load(io.BytesIO(body)).dtype == parsed:
                    header = body[: len(body) - 3 * parsed.itemsize]
                    row["header_len"] = len(header)
                    row["header_sha256"] = hashlib.sha256(header).hexdigest()
                    row["header"] = header.hex() if len(header) <= 2048 else "(long)"
            except ValueError:
                pass
            rows.append(row)
    with open(os.path.join(OUT, f"descrs-numpy-{np.__version__}.json"), "w") as f:
        json.dump({"numpy": np.__version__, "shape": [3], "dtypes": rows}, f, indent=1)


def main():
    shutil.rmtree(os.path.join(OUT, SUB), ignore_errors=True)
    os.makedirs(os.path.join(OUT, SUB))
    for i, s in enumerate(SCALARS):
        write(f"scalar{i:02d}", s, (6, 5), (4, 3), (2, 2), "empty", f"dtype {s!r}")
    for name, dt in STRUCTS.items():
        write(name, dt, (7, 5), (4, 3), (2, 2), "empty", "structured dtype")
    write("bool-field-asarray", STRUCTS["bool-field"], (50,), (20,), (8,), "asarray",
          "structured dtype with a bool field, blosc2.asarray")
    write("aligned-asarray", STRUCTS["aligned"], (9,), (4,), (2,), "asarray",
          "aligned dtype through blosc2.asarray (padding becomes a field)")
    write("empty-1d", "<f4", (0,), None, None, "empty", "shape (0,)")
    write("empty-3d", "<u2", (3, 0, 4), None, None, "empty", "shape (3, 0, 4)")
    write("empty-struct", STRUCTS["bool-field"], (0,), None, None, "empty", "empty structured")
    if int(VER.split(".")[0]) >= 4:
        mismatched("typesize-u1", (40, 3), (11, 3), (5, 3), "|u1")
        mismatched("typesize-f8", (6, 7), (4, 4), (2, 3), "<f8")
    with open(os.path.join(OUT, SUB, "manifest.json"), "w") as f:
        json.dump({"writer": f"python-blosc2 {VER}", "numpy": np.__version__,
                   "fixtures": MANIFEST}, f, indent=1, ensure_ascii=False)
    descr_table()
    bloscpack_arrays()


main()
