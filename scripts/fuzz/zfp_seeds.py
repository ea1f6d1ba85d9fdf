#!/usr/bin/env python3
"""Seeds for the `zfp` fuzz target: ZFP block streams written by
python-blosc2, in the target's input layout (fuzz/fuzz_targets/zfp.rs:
mode, meta, typesize byte, ndim, one byte per block dimension, stream).

Usage: scripts/fuzz/zfp_seeds.py OUTDIR   (needs python-blosc2, as in .venv)
"""
import os
import struct
import sys
import tempfile

import blosc2
import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
MODES = {blosc2.Codec.ZFP_ACC: 0, blosc2.Codec.ZFP_PREC: 1, blosc2.Codec.ZFP_RATE: 2}
CASES = [
    (blosc2.Codec.ZFP_ACC, 256 - 3, "<f4", (64,)),
    (blosc2.Codec.ZFP_ACC, 1, "<f8", (8, 8)),
    (blosc2.Codec.ZFP_PREC, 10, "<f4", (5, 6, 7)),
    (blosc2.Codec.ZFP_PREC, 30, "<f8", (4, 4, 4, 5)),
    (blosc2.Codec.ZFP_RATE, 25, "<f8", (64,)),
    (blosc2.Codec.ZFP_RATE, 50, "<f4", (6, 9)),
]

with tempfile.TemporaryDirectory() as d:
    for k, (codec, meta, dtype, blocks) in enumerate(CASES):
        shape = tuple(b * 2 for b in blocks)
        grids = np.meshgrid(*[np.linspace(0, 3, n) for n in shape], indexing="ij")
        arr = np.asarray(sum(np.sin((i + 1) * g) for i, g in enumerate(grids)), dtype=dtype)
        p = os.path.join(d, "a.b2nd")
        cparams = {"codec": codec, "codec_meta": meta, "filters": [blosc2.Filter.NOFILTER]}
        a = blosc2.asarray(arr, chunks=shape, blocks=blocks, cparams=cparams, urlpath=p, mode="w")
        chunk = a.schunk.get_chunk(0)
        nbytes, blocksize, cbytes = struct.unpack_from("<iii", chunk, 4)
        nblocks = -(-nbytes // blocksize)
        starts = struct.unpack_from(f"<{nblocks}i", chunk, 32)
        for j, s in enumerate(starts[:2]):
            csize = struct.unpack_from("<i", chunk, s)[0]
            if csize <= 0 or csize == blocksize:
                continue  # a run or a raw block: no ZFP stream
            stream = chunk[s + 4 : s + 4 + csize]
            head = bytes([MODES[codec], meta, 0 if dtype == "<f4" else 1, len(blocks)])
            dims = bytes(b - 1 for b in blocks)
            with open(os.path.join(out, f"zfp-{k}-{j}"), "wb") as f:
                f.write(head + dims + stream)
print(f"zfp seeds in {out}")
