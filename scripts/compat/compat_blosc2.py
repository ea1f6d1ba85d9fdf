"""Cross-version fixtures written by python-blosc2: chunks, frames, sparse
frames, special chunks, dictionaries and b2nd arrays."""

import os
import shutil

import numpy as np

from compat_common import PICK, RNG, S, chunk_oracle, data_for, flavour, npy_bytes, record, sample, size, skip


def b2_filter_sets(blosc2):
    F = blosc2.Filter
    sets = {"none": [], "shuffle": [F.SHUFFLE], "bitshuffle": [F.BITSHUFFLE], "delta": [F.DELTA, F.SHUFFLE],
            "trunc": [F.TRUNC_PREC, F.SHUFFLE]}
    if hasattr(F, "BYTEDELTA"):
        sets["bytedelta"] = [F.SHUFFLE, F.BYTEDELTA]
    return sets


def b2_meta(blosc2, fl, ts):
    F = blosc2.Filter
    meta = [0] * len(fl)
    for i, f in enumerate(fl):
        if f == F.TRUNC_PREC:
            meta[i] = 20 if ts == 8 else 10
        if hasattr(F, "BYTEDELTA") and f == F.BYTEDELTA:
            meta[i] = ts
    return meta


def b2_chunks(blosc2):
    sets = b2_filter_sets(blosc2)
    C = blosc2.Codec
    codecs = [C.BLOSCLZ, C.LZ4, C.LZ4HC, C.ZLIB, C.ZSTD]
    splits = list(blosc2.SplitMode)
    combos = [(c, fn, ts, sp) for c in codecs for fn in sets for ts in [1, 2, 3, 4, 8, 12, 16] for sp in splits
              if not (fn == "trunc" and ts not in (4, 8))]
    for k, (c, fn, ts, sp) in enumerate(sample(combos, 150, 14)):
        fl, fv = sets[fn], flavour()
        nbytes = size([1, 100, 4099, 65536 + 13, 200_003], [100, 4099, 12_011])
        nbytes = max(nbytes - nbytes % ts, ts) if PICK.random() < 0.5 else nbytes
        blocksize = PICK.choice([0, 4096 * ts, 1536 * ts, 5000, 777])
        use_dict = c in (C.ZSTD, C.LZ4) and PICK.random() < 0.2
        src = data_for(ts, nbytes, fv)
        name = f"chunk2/{k:03d}-{c.name.lower()}-{fn}-ts{ts}-{sp.name.lower()}-bs{blocksize}{'-dict' if use_dict else ''}.b2"
        try:
            kw = dict(codec=c, filters=fl, filters_meta=b2_meta(blosc2, fl, ts), typesize=ts,
                      clevel=PICK.choice([1, 5, 9]), splitmode=sp, blocksize=blocksize)
            if use_dict:
                kw["use_dict"] = True
            ch = blosc2.compress2(src, **kw)
        except Exception as e:
            skip(name, e)
            continue
        try:
            ref = blosc2.decompress2(ch)
        except Exception:
            ref = None
        if fn == "bytedelta" and ref is not None and ref != src:
            # C-Blosc2 before 3.3.2 never encoded (nor decoded) the trailing
            # length % typesize bytes of a bytedelta block: the chunk holds
            # whatever its buffer held there, so no reader can give them back.
            skip(name, "bytedelta block tail never encoded (C-Blosc2 < 3.3.2): data lost, no reader can decode it")
            continue
        chunk_oracle(os.path.join(S.out, name), ch, ref, src, ts, fn == "delta", "blosc2-chunk", fn == "trunc",
                     codec=c.name,
                     filters=fn, typesize=ts, split=sp.name, blocksize=blocksize, nbytes=nbytes, dict=use_dict,
                     **S.producer)


def schunk(blosc2, p, chunksize, contiguous, cparams, meta=None):
    """A new super-chunk at `p`, with metalayers where the writer takes them."""
    os.makedirs(os.path.dirname(p), exist_ok=True)
    if os.path.isdir(p):
        shutil.rmtree(p)
    elif os.path.exists(p):
        os.remove(p)
    kw = dict(chunksize=chunksize, urlpath=p, contiguous=contiguous, cparams=cparams, mode="w")
    if meta:
        kw["meta"] = meta
    while True:
        try:
            return blosc2.SChunk(**kw)
        except Exception:
            if "meta" in kw:
                del kw["meta"]
            elif "mode" in kw:
                del kw["mode"]
            else:
                raise


def frame_ref(s):
    n = s.nchunks if hasattr(s, "nchunks") else -(-s.nbytes // s.chunksize)
    return b"".join(bytes(s.decompress_chunk(i)) for i in range(n))


def b2_frames(blosc2):
    sets = b2_filter_sets(blosc2)
    C = blosc2.Codec
    combos = [(c, fn, ts, cont) for c in [C.BLOSCLZ, C.LZ4, C.ZLIB, C.ZSTD] for fn in sets
              for ts in [1, 3, 4, 8, 12] for cont in [True, False] if not (fn == "trunc" and ts not in (4, 8))]
    for k, (c, fn, ts, cont) in enumerate(sample(combos, 40, 6)):
        fl = sets[fn]
        chunksize = size([4096, 40_000, 1 << 20], [4096, 10_000])
        chunksize -= chunksize % ts
        nbytes = chunksize * PICK.choice([1, 3]) + PICK.choice([0, ts * 5, chunksize // 2 // ts * ts])
        src = data_for(ts, nbytes, flavour())
        name = f"frame/{k:03d}-{c.name.lower()}-{fn}-ts{ts}.{'b2frame' if cont else 'sframe'}"
        p = os.path.join(S.out, name)
        try:
            cp = dict(codec=c, filters=fl, filters_meta=b2_meta(blosc2, fl, ts), typesize=ts, clevel=5)
            s = schunk(blosc2, p, chunksize, cont, cp, meta={"origin": "bloscfs-compat", "n": nbytes})
            for i in range(0, nbytes, chunksize):
                s.append_data(src[i:i + chunksize])
            s.vlmeta["note"] = "compat"
            ref = frame_ref(s)
        except Exception as e:
            skip(name, e)
            continue
        if ref != src and not (fn == "trunc" and len(ref) == len(src)):
            skip(name, "the writer's decoder returns other bytes than were written")
            continue
        record(p, ref, "blosc2-frame" if cont else "blosc2-sframe", codec=c.name, filters=fn, typesize=ts,
               chunksize=chunksize, nbytes=nbytes, **S.producer)
    b2_special_frames(blosc2)


def b2_special_frames(blosc2):
    C = blosc2.Codec
    for kind in ["ZERO", "NAN", "UNINIT", "VALUE"]:
        for cont in [True, False]:
            name = f"frame/special-{kind.lower()}.{'b2frame' if cont else 'sframe'}"
            p = os.path.join(S.out, name)
            try:
                s = schunk(blosc2, p, 8000, cont, dict(typesize=8, codec=C.LZ4))
                kw = {"value": np.float64(2.5)} if kind == "VALUE" else {}
                s.fill_special(2500, getattr(blosc2.SpecialValue, kind), **kw)
                ref = frame_ref(s)
            except Exception as e:
                skip(name, e)
                continue
            if kind == "UNINIT":
                ref = bytes(len(ref))  # uninitialised chunks are served as zeros
            record(p, ref, "blosc2-frame" if cont else "blosc2-sframe", special=kind, **S.producer)
    for c in [C.ZSTD, C.LZ4]:
        name = f"frame/dict-{c.name.lower()}.b2frame"
        p = os.path.join(S.out, name)
        try:
            s = schunk(blosc2, p, 40_000, True, dict(typesize=4, codec=c, use_dict=True, clevel=5))
            raw = (np.arange(30_000, dtype="<i4") % 1000).tobytes()
            for i in range(0, len(raw), 40_000):
                s.append_data(raw[i:i + 40_000])
            ref = frame_ref(s)
            assert ref == raw
        except Exception as e:
            skip(name, e)
            continue
        record(p, ref, "blosc2-frame", dict=True, codec=c.name, **S.producer)
    # A shorter chunk inside a frame of fixed chunk size (an append of less
    # than a chunk, then more appends).
    p = os.path.join(S.out, "frame/short-chunk-inside.b2frame")
    try:
        s = schunk(blosc2, p, 4000, True, dict(typesize=4, codec=C.LZ4))
        parts = [np.arange(1000, dtype="<i4"), np.arange(300, dtype="<i4") * 7, np.arange(1000, dtype="<i4") * 3]
        for a in parts:
            s.append_data(a.tobytes())
        ref = frame_ref(s)
        assert ref == b"".join(a.tobytes() for a in parts)
        record(p, ref, "blosc2-frame", short_chunk_inside=True, known_defect="short chunk inside a fixed-size frame",
               **S.producer)
    except Exception as e:
        skip("frame/short-chunk-inside.b2frame", e)


ARRAY_CASES = [
    # shape, chunks, blocks, dtype, filters (None: the writer's default)
    ((10_007,), (1000,), (128,), "<f8", None),
    ((97, 131), (40, 50), (8, 25), "<i4", None),
    ((7, 11, 5), (4, 6, 3), (2, 3, 2), "<i2", None),
    ((33, 17), (33, 17), (33, 17), "<c16", None),
    ((25, 17), (10, 7), (5, 3), "<c8", None),
    ((5, 6, 7, 8), (3, 4, 5, 6), (2, 2, 3, 3), "|u1", None),
    ((6, 7, 8, 9), (4, 5, 6, 7), (2, 3, 3, 4), "<u2", "delta"),
    ((30, 40), (16, 16), (4, 8), "|b1", None),
    ((301,), (64,), (16,), "|S5", None),
    ((40, 3), (16, 2), (4, 2), "<U3", None),
    ((500,), (128,), (32,), "<M8[ns]", None),
    ((20, 30), (8, 8), (4, 4), "<M8[D]", None),
    ((300,), (100,), (30,), "<m8[s]", None),
    ((50,), (16,), (4,), [("a", "<i4"), ("b", "<f8", (2,)), ("c", "S3")], None),
    ((60,), (16,), (8,), [("x", "<u2"), ("y", "|u1")], None),
    ((40,), (16,), (8,), [("a", "<i4"), ("ok", "?")], None),
    ((0,), (10,), (5,), "<f8", None),
    ((4, 0, 3), (2, 2, 2), (1, 1, 1), "<i4", None),
    ((), (), (), "<f8", None),
    ((900, 700), (250, 300), (50, 100), "<f8", "bitshuffle"),
    ((4000,), (1000,), (250,), "<f4", "trunc"),
    ((60, 50), (32, 32), (16, 16), "<f8", "zfp"),
    ((40,), (16,), (8,), "|S300", None),
]
LOSSY = ("trunc", "zfp")


def array_data(shape, dt):
    n = int(np.prod(shape)) if shape else 1
    if dt.names:
        arr = np.zeros(n, dtype=dt)
        for f in dt.names:
            col = arr[f]
            if col.dtype.kind in "iuf":
                col[...] = (np.arange(n) % 97).reshape((n,) + (1,) * (col.ndim - 1))
            elif col.dtype.kind == "b":
                col[...] = np.arange(n) % 3 == 0
            elif col.dtype.kind == "S":
                col[...] = b"xyz"
    elif dt.kind == "f":
        arr = (np.cumsum(RNG.normal(size=n)) * 10).astype(dt)
    elif dt.kind == "c":
        arr = (RNG.normal(size=n) + 1j * RNG.normal(size=n)).astype(dt)
    elif dt.kind == "b":
        arr = RNG.integers(0, 2, size=n).astype(dt)
    elif dt.kind in "iu":
        arr = (np.arange(n) % 200).astype(dt)
    elif dt.kind in "Mm":
        arr = (np.arange(n, dtype="<i8") * 3600 + 1_700_000_000).astype(dt)
    elif dt.kind == "S":
        arr = np.array([b"ab%d" % (k % 1000) for k in range(n)], dtype=dt)
    else:
        arr = np.array(["x%d" % (k % 99) for k in range(n)], dtype=dt)
    return arr.reshape(shape)


def isolated(fn):
    """fn() run in a forked child: old releases corrupt their heap on some
    arrays, and such a crash must cost only that case."""
    import pickle
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        import signal
        signal.alarm(120)  # a lock held by another thread at the fork never frees
        os.close(r)
        try:
            out = (True, fn())
        except Exception as e:
            out = (False, str(e))
        with os.fdopen(w, "wb") as f:
            pickle.dump(out, f)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        raise RuntimeError(f"the writer crashed (wait status {status})")
    ok, val = pickle.loads(data)
    if not ok:
        raise RuntimeError(val)
    return val


def b2_arrays(blosc2):
    if not hasattr(blosc2, "asarray"):
        skip("b2nd/*", f"python-blosc2 {blosc2.__version__} has no b2nd arrays")
        return
    if hasattr(blosc2, "set_nthreads"):
        blosc2.set_nthreads(1)  # no worker threads to hold locks across isolated()'s fork
    sets = b2_filter_sets(blosc2)
    cases = ARRAY_CASES if S.full else [c for c in ARRAY_CASES if np.prod(c[0] or (1,)) < 20_000]
    for i, (shape, chunks, blocks, dt, fn) in enumerate(cases):
        dt = np.dtype(dt)
        arr = array_data(shape, dt)
        name = f"b2nd/array{i:02d}-{len(shape)}d-{dt.str if not dt.names else 'struct'}.b2nd".replace("<", "").replace("|", "")
        p = os.path.join(S.out, name)
        kw = dict(chunks=chunks, blocks=blocks) if shape else {}
        if fn == "zfp" and int(blosc2.__version__.split(".")[0]) < 3:
            skip(name, "ZFP arrays corrupt the heap of python-blosc2 2.x on reading back, now and then")
            continue
        if fn == "zfp":
            kw["cparams"] = dict(codec=getattr(blosc2.Codec, "ZFP_ACC", None), codec_meta=12, filters=[],
                                 filters_meta=[])
        elif fn:
            fl = sets[fn]
            kw["cparams"] = dict(filters=fl, filters_meta=b2_meta(blosc2, fl, dt.itemsize), codec=blosc2.Codec.ZSTD)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if os.path.exists(p):
            os.remove(p)

        def write_and_read():
            blosc2.asarray(arr, urlpath=p, mode="w", **kw)
            got = blosc2.open(p)
            return np.asarray(got[()] if not shape else got[...])

        try:
            ref = isolated(write_and_read)
        except Exception as e:
            skip(name, e)
            if os.path.exists(p):
                os.remove(p)
            continue
        params = dict(shape=list(shape), chunks=list(chunks), blocks=list(blocks), dtype=str(dt), filters=fn or "default")
        if dt.names and any(dt[f].kind == "b" for f in dt.names):
            params["known_defect"] = "structured dtype with a '?' field"
        if arr.size == 0:
            params["known_defect"] = "empty array"
        if fn == "zfp":
            params["known_defect"] = "ZFP codec"
        if dt.itemsize > 255:
            params["known_defect"] = "dtype itemsize != typesize"
        if ref.dtype != arr.dtype or ref.shape != arr.shape:
            params["note"] = f"the writer reads it back as {ref.dtype.str} {ref.shape}"
        elif fn not in LOSSY and ref.tobytes() != arr.tobytes() and dt.itemsize > 255:
            # Chunk headers hold the typesize in one byte: python-blosc2 2.7
            # stores other bytes than it was given, and its own read returns
            # heap contents. No file holds the data written.
            skip(name, "item size above 255: the writer stores other bytes than given")
            os.remove(p)
            continue
        elif fn not in LOSSY and ref.tobytes() != arr.tobytes():
            ref = arr
            params["note"] = "the writer's own read differs from the data written; the data written is expected"
        record(p, npy_bytes(ref), "b2nd", **params, **S.producer)
    # A partially written array: unwritten chunks are special zeros.
    p = os.path.join(S.out, "b2nd/partial.b2nd")
    try:
        blosc2.zeros((50_000,), dtype="f8", chunks=(10_000,), blocks=(1000,), urlpath=p, mode="w")
        a = blosc2.open(p, mode="a")
        a[25_000:37_000] = np.arange(12_000)
        record(p, npy_bytes(blosc2.open(p)[...]), "b2nd", partial=True, **S.producer)
    except Exception as e:
        skip("b2nd/partial.b2nd", e)


