"""Called by tests/mount/mount.rs: numpy reads the mounted .npy files and compares
them with python-blosc2's own slicing of the source arrays."""
import glob
import os
import random
import sys

import blosc2
import numpy as np

mp, src = sys.argv[1], sys.argv[2]
a = np.load(f"{mp}/grid.npy", mmap_mode="r")
ref = blosc2.open(f"{src}/grid.b2nd")
assert a.shape == (97, 131) and a.dtype == ref.dtype
assert (a[45, :] == ref[45, :]).all() and (a[:, 7] == ref[:, 7]).all()
del a
f = np.load(f"{mp}/fortran.npy", mmap_mode="r")
assert f.flags["F_CONTIGUOUS"] and f.shape == (200, 300)
assert (f == (np.arange(60000, dtype="<i4") % 977).reshape(200, 300)).all()
del f
s = np.fromfile(f"{mp}/series", dtype="<i8")
assert (s == np.arange(len(s)) // 7).all()
rng = random.Random(5)
n = 0
for p in sorted(glob.glob(f"{src}/arrays/*.b2nd")):
    ref = blosc2.open(p)
    name = f"{mp}/arrays/" + os.path.basename(p)[:-5] + ".npy"
    whole = np.load(name)
    assert whole.shape == ref.shape and whole.dtype == ref.dtype, name
    assert (whole == (ref[()] if ref.ndim == 0 else ref[...])).all(), name
    mm = np.load(name, mmap_mode="r")
    for _ in range(0 if ref.ndim == 0 else 10):
        sl = tuple(slice(a, a + rng.randint(1, 4)) for a in (rng.randrange(d) for d in ref.shape))
        assert (np.asarray(mm[sl]) == ref[sl]).all(), (name, sl)
    del mm
    n += 1
assert n >= 10, n
print("ok", n, "arrays")
