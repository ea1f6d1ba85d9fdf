#!/usr/bin/env python3
"""Frames for the remote tests' request counts, faults and replacements,
written by python-blosc2 at test time (run with the oracle venv .venv):

    gen_remote_data.py OUTDIR

OUTDIR/big.b2frame    16 MiB of uint64 in 8 chunks of 2 MiB, 256 KiB blocks
OUTDIR/big.raw        its uncompressed bytes
OUTDIR/big2.b2frame   the same shape and length, other values (a replacement)
OUTDIR/big2.raw
Blocks compress to about 100 KiB, more than one read-around span apart.
"""
import os
import sys

import blosc2
import numpy as np

N = 2 * 1024 * 1024  # 16 MiB of uint64
CHUNK = 256 * 1024  # items: 2 MiB chunks
BLOCK = 256 * 1024  # bytes


def write(out, name, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 << 24, N, dtype=np.uint64)
    raw = os.path.join(out, name + ".raw")
    a.tofile(raw)
    path = os.path.join(out, name + ".b2frame")
    blosc2.remove_urlpath(path)
    s = blosc2.SChunk(
        chunksize=CHUNK * 8,
        urlpath=path,
        contiguous=True,
        cparams={"codec": blosc2.Codec.LZ4, "clevel": 1, "typesize": 8, "blocksize": BLOCK},
    )
    for i in range(0, N, CHUNK):
        s.append_data(a[i : i + CHUNK])
    del s


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(out, "big", 1)
    write(out, "big2", 2)


if __name__ == "__main__":
    main()
