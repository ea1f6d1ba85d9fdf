#!/usr/bin/env python3
"""Write the variable-length-block (VL-block) fixtures of crates/blosc-decode/tests/decode/vlblocks.rs.

Producer: python-blosc2 (4.14.1, bundling C-Blosc2 3.3.5), the writer of
VL-block chunks (chunk format version 6, blosc2_flags2 bit 0): its
`blosc2_ext.vlcompress` (what BatchArray calls per batch) for single chunks
and SChunk frames, and BatchArray itself for frames as a user writes them.

Oracle: python-blosc2's own decoders. For every fixture expected to decode,
the script checks that `blosc2.decompress2` (whole chunk, C-Blosc2's
`blosc2_decompress`: the blocks concatenated), `vldecompress` (block by
block) and, for frames, `SChunk.decompress_chunk` all give back the bytes
written, and records their SHA-256 and the block sizes in manifest.json.

Delta: C-Blosc2 3.3 compresses every VL block against itself (block offset 0)
but `blosc2_decompress` decodes block k > 0 against the start of the chunk's
output, and `vldecompress` returns blocks it did not delta-decode: neither
gives back the data written. Such a chunk (more than one block) is recorded
as `expect: error`; a one-block delta chunk round-trips and is `ok`.

Run: /work/main/.venv/bin/python scripts/writers/vlblocks.py [outdir]
"""

import hashlib
import json
import os
import random
import sys

import blosc2
import msgpack
import numpy as np
from blosc2 import blosc2_ext as ext

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "tests", "fixtures", "writers", "vlblocks")
os.makedirs(OUT, exist_ok=True)
F = blosc2.Filter
C = blosc2.Codec
manifest = []


def sha(b):
    return hashlib.sha256(b).hexdigest()


def payloads(seed, n, lo=1, hi=3000):
    """`n` blocks of differing sizes: records, numbers, text, noise."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        size = rng.randint(lo, hi)
        kind = k % 4
        if kind == 0:
            rec = [{"id": seed * 1000 + k + j, "name": f"item-{k}-{j}",
                    "tags": ["a", "bb", "ccc"][: j % 4]} for j in range(size // 40 + 1)]
            b = msgpack.packb(rec)[:size]
        elif kind == 1:
            b = np.arange(seed + k, seed + k + size // 4 + 1, dtype="<i4").tobytes()[:size]
        elif kind == 2:
            b = (f"line {k}: the quick brown fox {seed} " * (size // 30 + 1)).encode()[:size]
        else:
            b = bytes(rng.getrandbits(8) for _ in range(size))
        out.append(b or b"\x00")
    return out


def vl_chunk(blocks, **cp):
    return ext.vlcompress(blocks, **cp)


def check_roundtrip(chunk, blocks):
    want = b"".join(blocks)
    whole = blosc2.decompress2(chunk)
    parts = ext.vldecompress(chunk)
    return whole == want and parts == blocks


def info(chunk):
    nbytes, cbytes, nblocks = blosc2.get_cbuffer_sizes(chunk)
    return {"version": chunk[0], "flags2": chunk[30], "nblocks": nblocks,
            "nbytes": nbytes, "cbytes": cbytes, "dict": bool(chunk[31] & 1)}


def single(name, blocks, expect="ok", **cp):
    chunk = vl_chunk(blocks, **cp)
    assert chunk[0] == 6 and chunk[30] & 1, name
    ok = check_roundtrip(chunk, blocks)
    assert ok == (expect == "ok"), (name, ok)
    path = f"{name}.b2"
    with open(os.path.join(OUT, path), "wb") as f:
        f.write(chunk)
    ent = {"path": path, "kind": "chunk", "expect": expect,
           "params": {k: str(v) for k, v in cp.items()},
           "block_sizes": [len(b) for b in blocks], **info(chunk)}
    if expect == "ok":
        ent["sha256"] = sha(b"".join(blocks))
    manifest.append(ent)
    return chunk


def frame_entry(path, sc, batches, expect="ok"):
    """Check a frame against what was written and SChunk's own decoder."""
    want = b"".join(b"".join(bl) for bl in batches)
    got = b"".join(sc.decompress_chunk(i) for i in range(sc.nchunks))
    assert got == want, path
    chunks = [sc.get_chunk(i) for i in range(sc.nchunks)]
    for c, bl in zip(chunks, batches):
        assert c[30] & 1 and check_roundtrip(c, bl), path
    manifest.append({"path": path, "kind": "frame", "expect": expect,
                     "nchunks": sc.nchunks,
                     "chunk_block_sizes": [[len(b) for b in bl] for bl in batches],
                     "nbytes": len(want), "sha256": sha(want)})


# --- Single chunks: every codec, with and without filters ----------------
codecs = [("blosclz", C.BLOSCLZ), ("lz4", C.LZ4), ("lz4hc", C.LZ4HC),
          ("zlib", C.ZLIB), ("zstd", C.ZSTD)]
filters = [("nofilter", [F.NOFILTER]), ("shuffle", [F.SHUFFLE]),
           ("bitshuffle", [F.BITSHUFFLE]),
           ("shuffle-bytedelta", [F.SHUFFLE, F.BYTEDELTA])]
for ci, (cname, codec) in enumerate(codecs):
    for fi, (fname, flt) in enumerate(filters):
        ts = [4, 8, 2, 4, 1][(ci + fi) % 5]
        meta = [0] * len(flt)
        if F.BYTEDELTA in flt:
            meta = [0, ts]
        blocks = payloads(100 * ci + fi, 6 + fi)
        single(f"{cname}-{fname}-ts{ts}", blocks, codec=codec, clevel=5,
               typesize=ts, filters=flt, filters_meta=meta, nthreads=1)

# A block of one byte, blocks not a multiple of the typesize, noise stored raw.
single("lz4-shuffle-ts8-odd-sizes", [b"x", b"0123456789abc", bytes(range(256)) * 3 + b"z",
                                     b"\x07" * 4097],
       codec=C.LZ4, clevel=9, typesize=8, filters=[F.SHUFFLE], filters_meta=[0])
single("zstd-one-block", payloads(7, 1, 5000, 5000), codec=C.ZSTD, clevel=3,
       typesize=4, filters=[F.SHUFFLE], filters_meta=[0])
# Dictionaries (need >= 8 blocks and >= 5 KiB); ObjectArray/BatchArray turn
# them on for zstd.
for cname, codec in [("zstd", C.ZSTD), ("lz4", C.LZ4), ("lz4hc", C.LZ4HC)]:
    ch = single(f"{cname}-dict", payloads(31, 24, 400, 2500), codec=codec, clevel=5,
                typesize=1, filters=[F.NOFILTER], filters_meta=[0], use_dict=True)
    assert ch[31] & 1, cname  # the dictionary is really there
# Delta: one block round-trips; several do not in C-Blosc2 3.3 (see top).
single("lz4-delta-one-block", [np.arange(3000, dtype="<i4").tobytes()], codec=C.LZ4,
       clevel=5, typesize=4, filters=[F.DELTA], filters_meta=[0])
single("lz4-delta-blocks", [np.arange(k * 100, k * 100 + 50 * (k + 1), dtype="<i4").tobytes()
                            for k in range(4)],
       expect="error", codec=C.LZ4, clevel=5, typesize=4, filters=[F.DELTA], filters_meta=[0])

# A chunk of many small blocks (for the one-block-read count).
single("zstd-many-blocks", payloads(55, 64, 500, 1500), codec=C.ZSTD, clevel=1,
       typesize=1, filters=[F.NOFILTER], filters_meta=[0])

# --- Frames -----------------------------------------------------------------
# SChunk of VL chunks with mixed codecs (chunksize -1: variable).
path = "schunk-mixed.b2frame"
full = os.path.join(OUT, path)
blosc2.remove_urlpath(full)
sc = blosc2.SChunk(chunksize=-1, urlpath=full, contiguous=True, mode="w",
                   cparams={"codec": C.ZSTD, "clevel": 5, "typesize": 1})
batches = []
for k, (cname, codec) in enumerate(codecs):
    bl = payloads(900 + k, 3 + 2 * k, 1, 4000)
    batches.append(bl)
    sc.append_chunk(vl_chunk(bl, codec=codec, clevel=5, typesize=4,
                             filters=[F.SHUFFLE], filters_meta=[0]))
frame_entry(path, sc, batches)
del sc

# BatchArray, as a user writes one (msgpack batches, zstd with a dictionary).
for name, cp, ipb in [("batcharray-zstd-dict.b2frame", {"codec": C.ZSTD, "clevel": 5, "use_dict": True}, 25),
                      ("batcharray-default.b2frame", None, 50),
                      ("batcharray-lz4.b2frame", {"codec": C.LZ4, "clevel": 5}, 7)]:
    full = os.path.join(OUT, name)
    blosc2.remove_urlpath(full)
    kw = {"urlpath": full, "mode": "w", "items_per_block": ipb}
    if cp is not None:
        kw["cparams"] = cp
    ba = blosc2.BatchArray(**kw)
    rng = random.Random(len(name))
    for b in range(4):
        ba.append([{"batch": b, "row": r, "kind": ["alpha", "beta", "gamma"][r % 3], "v": rng.random(), "s": "x" * rng.randint(0, 60)}
                   for r in range(rng.randint(20, 400))])
    sc = ba.schunk
    if cp is not None and cp.get("use_dict"):
        assert any(sc.get_chunk(i)[31] & 1 for i in range(sc.nchunks)), name
    batches = [ext.vldecompress(sc.get_chunk(i)) for i in range(sc.nchunks)]
    assert b"".join(b"".join(x) for x in batches) == b"".join(
        sc.decompress_chunk(i) for i in range(sc.nchunks))
    # The payloads are the msgpack blocks of the items appended.
    assert msgpack.unpackb(batches[1][0])[0]["batch"] == 1
    frame_entry(name, sc, batches)
    del ba, sc

# A sparse frame (a directory: chunks.b2frame and one file per chunk).
name = "batcharray-sparse.b2frame"
full = os.path.join(OUT, name)
blosc2.remove_urlpath(full)
ba = blosc2.BatchArray(storage=blosc2.Storage(urlpath=full, contiguous=False, mode="w"),
                       cparams={"codec": C.ZSTD, "clevel": 3}, items_per_block=30)
for b in range(3):
    ba.append([{"batch": b, "row": r, "name": f"n{r * 7 % 13}"} for r in range(90 + 40 * b)])
sc = ba.schunk
batches = [ext.vldecompress(sc.get_chunk(i)) for i in range(sc.nchunks)]
frame_entry(name, sc, batches)
del ba, sc

with open(os.path.join(OUT, "manifest.json"), "w") as f:
    json.dump({"producer": {"blosc2": blosc2.__version__,
                            "c-blosc2": blosc2.blosclib_version},
               "fixtures": manifest}, f, indent=1)
def size(p):
    if os.path.isdir(p):
        return sum(size(os.path.join(p, q)) for q in os.listdir(p))
    return os.path.getsize(p)


print(len(manifest), "fixtures,", sum(size(os.path.join(OUT, e["path"])) for e in manifest),
      "bytes")
