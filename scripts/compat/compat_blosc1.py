"""Cross-version fixtures written by C-Blosc1 producers (python-blosc,
numcodecs, zarr v2/v3, imagecodecs) and by the HDF5 filters (hdf5plugin)."""

import os
import shutil

import numpy as np

from compat_common import PICK, S, chunk_oracle, data_for, flavour, npy_bytes, record, sample, size, skip, try_import, write


from compat_blosc2 import array_data


CODECS1 = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]


def blosc1_matrix(k_full, k_sample):
    combos = [(c, sh, ts) for c in CODECS1 for sh in [0, 1, 2] for ts in [1, 2, 3, 4, 8, 12, 16, 20]]
    for c, sh, ts in sample(combos, k_full, k_sample):
        nbytes = size([50, 5000, 70_001, 300_000], [50, 5000, 12_001])
        if PICK.random() < 0.5:
            nbytes = max(nbytes - nbytes % ts, ts)
        yield c, sh, ts, nbytes, PICK.choice([0, 0, 4096, 5000, 1 << 16]), data_for(ts, nbytes, flavour())


def pyblosc_chunks(blosc):
    for k, (c, sh, ts, nbytes, bs, src) in enumerate(blosc1_matrix(80, 8)):
        name = f"chunk1/{k:03d}-{c}-sh{sh}-ts{ts}-bs{bs}.blosc"
        try:
            blosc.set_blocksize(bs)
            ch = blosc.compress(src, typesize=ts, cname=c, shuffle=sh, clevel=PICK.choice([1, 5, 9]))
            ref = blosc.decompress(ch)
        except Exception as e:
            skip(name, e)
            continue
        finally:
            blosc.set_blocksize(0)
        chunk_oracle(os.path.join(S.out, name), ch, ref, src, ts, False, "blosc1-chunk", codec=c, shuffle=sh,
                     typesize=ts, blocksize=bs, nbytes=nbytes, **S.producer)


def numcodecs_chunks(numcodecs):
    from numcodecs import blosc as nb
    for k, (c, sh, ts, nbytes, bs, src) in enumerate(blosc1_matrix(60, 6)):
        name = f"numcodecs/{k:03d}-{c}-sh{sh}-ts{ts}-bs{bs}.blosc"
        try:
            buf = np.frombuffer(src[:len(src) - len(src) % ts], dtype=f"V{ts}")
            ch = bytes(numcodecs.Blosc(cname=c, clevel=5, shuffle=sh, blocksize=bs).encode(buf))
            ref = bytes(nb.decompress(ch))
        except Exception as e:
            skip(name, e)
            continue
        chunk_oracle(os.path.join(S.out, name), ch, ref, buf.tobytes(), ts, False, "blosc1-chunk", codec=c,
                     shuffle=sh, typesize=ts, blocksize=bs, **S.producer)


ZARR_CASES = [
    # shape, chunks, dtype, cname, shuffle
    ((100, 130), (40, 50), "<f8", "lz4", 1),
    ((7, 11, 5), (4, 6, 3), "<i2", "zstd", 2),
    ((1000,), (300,), "|b1", "blosclz", 0),
    ((60, 5), (16, 5), "<U4", "zlib", 1),
    ((50,), (16,), [("a", "<i4"), ("b", "<f8")], "lz4hc", 1),
    ((5, 6, 7, 8), (3, 4, 5, 6), "<c8", "zstd", 1),
    ((400,), (128,), "<M8[s]", "lz4", 2),
    ((30, 30), (8, 8), ">i4", "zstd", 1),
]


def zarr_chunk_files(root, decode, what):
    """Record every file under a zarr array `root`: chunk files are Blosc
    chunks (what the codec decodes them to), everything else is not a
    container."""
    for dirpath, _dirs, files in os.walk(root):
        for fn in sorted(files):
            p = os.path.join(dirpath, fn)
            raw = open(p, "rb").read()
            if fn.startswith(".z") or fn == "zarr.json" or what.get("sharded"):
                record(p, b"", "none", expect="not-container", **what, **S.producer)
            else:
                record(p, bytes(decode(raw)), "blosc1-chunk", **what, **S.producer)


def zarr_arrays(zarr, numcodecs):
    from numcodecs import blosc as nb
    v3 = int(zarr.__version__.split(".")[0]) >= 3
    formats = [2, 3] if v3 else [2]
    cases = ZARR_CASES if S.full else ZARR_CASES[:3]
    for fmt in formats:
        for i, (shape, chunks, dt, cname, sh) in enumerate(cases):
            dt = np.dtype(dt)
            arr = array_data(shape, dt)
            root = os.path.join(S.out, f"zarr{fmt}/array{i}")
            shutil.rmtree(root, ignore_errors=True)
            what = dict(zarr_format=fmt, shape=list(shape), chunks=list(chunks), dtype=str(dt), cname=cname,
                        shuffle=sh)
            try:
                if fmt == 2 and not v3:
                    z = zarr.open(root, mode="w", shape=shape, chunks=chunks, dtype=dt,
                                  compressor=numcodecs.Blosc(cname=cname, clevel=5, shuffle=sh))
                elif fmt == 2:
                    z = zarr.create_array(root, shape=shape, chunks=chunks, dtype=dt, zarr_format=2,
                                          compressors=numcodecs.Blosc(cname=cname, clevel=5, shuffle=sh))
                else:
                    shuf = ["noshuffle", "shuffle", "bitshuffle"][sh]
                    z = zarr.create_array(root, shape=shape, chunks=chunks, dtype=dt, zarr_format=3,
                                          compressors=zarr.codecs.BloscCodec(cname=cname, clevel=5, shuffle=shuf,
                                                                             typesize=dt.itemsize))
                z[...] = arr
                back = zarr.open(root, mode="r")[...]
                same = back.tobytes() == arr.tobytes() if dt.names else np.array_equal(back, arr)
                assert same, "zarr reads back other data"
            except Exception as e:
                shutil.rmtree(root, ignore_errors=True)
                skip(f"zarr{fmt}/array{i}", e)
                continue
            zarr_chunk_files(root, nb.decompress, what)
    if v3:
        root = os.path.join(S.out, "zarr3/sharded")
        shutil.rmtree(root, ignore_errors=True)
        arr = array_data((64, 64), np.dtype("<f4"))
        z = zarr.create_array(root, shape=arr.shape, chunks=(16, 16), shards=(32, 32), dtype=arr.dtype,
                              compressors=zarr.codecs.BloscCodec(cname="zstd", clevel=5, shuffle="shuffle"))
        z[...] = arr
        zarr_chunk_files(root, nb.decompress, dict(zarr_format=3, sharded=True))


def imagecodecs_chunks(ic):
    for k, (c, sh, ts, nbytes, bs, src) in enumerate(blosc1_matrix(40, 4)):
        name = f"imagecodecs/blosc-{k:03d}-{c}-sh{sh}-ts{ts}-bs{bs}.blosc"
        try:
            ch = bytes(ic.blosc_encode(src, 5, compressor=c, shuffle=sh, typesize=ts, blocksize=bs, numthreads=1))
            ref = bytes(ic.blosc_decode(ch))
        except Exception as e:
            skip(name, e)
            continue
        chunk_oracle(os.path.join(S.out, name), ch, ref, src, ts, False, "blosc1-chunk", codec=c, shuffle=sh,
                     typesize=ts, blocksize=bs, writer="imagecodecs.blosc_encode", **S.producer)
    splits = ["always", "never", "auto", "forward"]
    for k, (c, sh, ts, nbytes, bs, src) in enumerate(blosc1_matrix(40, 4)):
        sp = PICK.choice(splits)
        name = f"imagecodecs/blosc2-{k:03d}-{c}-sh{sh}-ts{ts}-bs{bs}-{sp}.b2"
        try:
            kw = dict(compressor=c, shuffle=sh, splitmode=sp, typesize=ts, blocksize=bs, numthreads=1)
            try:
                ch = bytes(ic.blosc2_encode(src, 5, **kw))
            except TypeError:  # releases before splitmode
                del kw["splitmode"]
                sp = "default"
                ch = bytes(ic.blosc2_encode(src, 5, **kw))
            ref = bytes(ic.blosc2_decode(ch))
        except Exception as e:
            skip(name, e)
            continue
        chunk_oracle(os.path.join(S.out, name), ch, ref, src, ts, False, "blosc2-chunk", codec=c, shuffle=sh,
                     typesize=ts, blocksize=bs, split=sp, writer="imagecodecs.blosc2_encode", **S.producer)


H5_CASES = [
    # shape, chunks, dtype, filter, cname, shuffle/filters
    ((1000, 7), (300, 5), "<i4", "blosc", "lz4", 1),
    ((4000,), (1024,), "<f8", "blosc", "zstd", 2),
    ((20, 30, 40), (8, 8, 8), "<i2", "blosc", "blosclz", 0),
    ((500, 3), (64, 3), "<c16", "blosc", "zlib", 1),
    ((1000, 7), (300, 5), "<i4", "blosc2", "lz4", 1),
    ((4000,), (1024,), "<f8", "blosc2", "zstd", 2),
    ((20, 30, 40), (8, 8, 8), "<u2", "blosc2", "blosclz", 1),
    ((300,), (64,), "|S7", "blosc2", "lz4hc", 0),
]


def h5_expected_chunk(arr, offset, chunks):
    """The chunk as HDF5 hands it to the filter: the array's part of it in C
    order, padded to the full chunk shape with the fill value (zero)."""
    full = np.zeros(chunks, dtype=arr.dtype)
    sl = tuple(slice(o, min(o + c, s)) for o, c, s in zip(offset, chunks, arr.shape))
    part = arr[sl]
    full[tuple(slice(0, n) for n in part.shape)] = part
    return full


def hdf5_chunks(h5py, hdf5plugin):
    blosc2 = try_import("blosc2")
    cases = H5_CASES if S.full else H5_CASES[::3]
    path = os.path.join(S.out, "hdf5/data.h5")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, "w") as f:
        for i, (shape, chunks, dt, flt, cname, sh) in enumerate(cases):
            arr = array_data(shape, np.dtype(dt))
            try:
                if flt == "blosc":
                    opts = hdf5plugin.Blosc(cname=cname, clevel=5, shuffle=sh)
                else:
                    opts = hdf5plugin.Blosc2(cname=cname, clevel=5, filters=sh)
                d = f.create_dataset(f"d{i}", data=arr, chunks=chunks, **opts)
            except Exception as e:
                skip(f"hdf5/d{i} ({flt})", e)
                continue
            assert np.array_equal(d[...], arr)
            for j in range(d.id.get_num_chunks()):
                off = d.id.get_chunk_info(j).chunk_offset
                _mask, raw = d.id.read_direct_chunk(off)
                want = h5_expected_chunk(arr, off, chunks)
                what = dict(filter=flt, cname=cname, shuffle=sh, dtype=dt, chunk_offset=list(off), **S.producer)
                p = os.path.join(S.out, f"hdf5/d{i}-{flt}-{'-'.join(map(str, off))}.chunk")
                write(p, raw)
                if flt == "blosc":
                    record(p, want.tobytes(), "blosc1-chunk", **what)
                elif blosc2 is None:
                    os.remove(p)
                    skip(p, "no python-blosc2 in this venv to read the frame's metalayers")
                else:
                    h5_blosc2_chunk(blosc2, p, raw, want, what)
    record(path, b"", "none", expect="not-container", **S.producer)


def h5_blosc2_chunk(blosc2, p, raw, want, what):
    """The Blosc2 filter stores each chunk as a frame: a b2nd array (shown as
    .npy in the dtype its metalayer gives) or, without b2nd, plain bytes."""
    frame = blosc2.schunk_from_cframe(raw)
    if "b2nd" not in frame.meta:
        got = b"".join(bytes(frame.decompress_chunk(i)) for i in range(frame.nchunks))
        assert got == want.tobytes(), p
        record(p, got, "blosc2-frame", **what)
        return
    try:
        got = np.asarray(blosc2.ndarray_from_cframe(raw)[...])
    except Exception as e:
        os.remove(p)
        skip(p, f"python-blosc2 {blosc2.__version__} cannot read the chunk's b2nd frame: {e}")
        return
    view = np.frombuffer(want.tobytes(), dtype=got.dtype).reshape(got.shape)
    assert view.tobytes() == got.tobytes(), p
    record(p, npy_bytes(view), "b2nd", **what)
