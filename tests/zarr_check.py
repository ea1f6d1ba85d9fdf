"""Called by tests/mount/zarr.rs: through a mount of the Zarr fixtures
(scripts/fixtures/gen_zarr.py), numpy opens each array's .npy, whole and
memory-mapped, and reads random windows of its bytes, all equal to what
zarr-python read when the fixtures were written (expected/*.npy); and
zarr-python reads every array of every store through the mount as it
reads it from the source. Prints the arrays shown without a .npy as
`no npy: WRITER/PATH` lines."""
import glob
import json
import os
import random
import sys
import warnings

import numpy as np
import zarr

mp, src = sys.argv[1], sys.argv[2]
rng = random.Random(7)
arrays = 0
for manifest in sorted(glob.glob(f"{src}/*/manifest.json")):
    w = os.path.dirname(manifest)
    rel_w = os.path.relpath(w, src)
    for a in json.load(open(manifest))["arrays"]:
        rel = a["path"]
        npy = f"{mp}/{rel_w}/stores/" + (rel[:-5] if rel.endswith(".zarr") else rel) + ".npy"
        want_path = f"{w}/expected/{rel}.npy"
        want = np.load(want_path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            through = zarr.open(f"{mp}/{rel_w}/stores/{rel}", mode="r")[...]
            direct = zarr.open(f"{w}/stores/{rel}", mode="r")[...]
        # zarr-python reads the store through the mount as from the source.
        assert np.array_equal(through, direct, equal_nan=want.dtype.kind in "fc"), rel
        arrays += 1
        if not os.path.exists(npy):
            print(f"no npy: {rel_w}/{rel}")
            continue
        whole = np.load(npy)
        assert whole.dtype == want.dtype and whole.shape == want.shape, (npy, whole.dtype, whole.shape)
        assert np.array_equal(whole, want, equal_nan=want.dtype.kind in "fc"), npy
        mm = np.load(npy, mmap_mode="r")
        assert np.array_equal(np.asarray(mm), want, equal_nan=want.dtype.kind in "fc"), npy
        del mm
        raw = open(want_path, "rb").read()
        fd = os.open(npy, os.O_RDONLY)
        try:
            assert os.fstat(fd).st_size == len(raw), npy
            for _ in range(20):
                off = rng.randrange(len(raw))
                n = rng.randint(1, 5000)
                assert os.pread(fd, n, off) == raw[off:off + n], (npy, off, n)
        finally:
            os.close(fd)
assert arrays >= 10, arrays
print("ok", arrays, "arrays")
