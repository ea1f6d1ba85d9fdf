"""Called by tests/mount/zarr.rs: through a mount of the Zarr fixtures
(scripts/fixtures/gen_zarr.py), numpy opens each array's .npy, whole and
memory-mapped, and reads random windows of its bytes, all equal to what
zarr-python read when the fixtures were written (expected/*.npy); and
zarr-python reads every array of every store through the mount as it
reads it from the source. An array the manifest lists as unsupported
has no .npy, and zarr-python still reads it through the mount."""
import glob
import json
import os
import random
import sys
import warnings

import numpy as np
import zarr

mp, src = sys.argv[1], sys.argv[2]


def same_through_mount(rel_w, w, rel, nan):
    """zarr-python reads the store through the mount as from the source (or
    fails the same way on both: zarr 3 reads no v2 subarray fields)."""
    def read(p):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return zarr.open(p, mode="r")[...]
            except Exception as e:  # noqa: BLE001 (compared below)
                return f"{type(e).__name__}: {e}"
    through = read(f"{mp}/{rel_w}/stores/{rel}")
    direct = read(f"{w}/stores/{rel}")
    if isinstance(direct, str):
        assert through == direct.replace(f"{w}/stores", f"{mp}/{rel_w}/stores"), (rel, through, direct)
    elif nan:
        assert np.array_equal(through, direct, equal_nan=True), rel
    else:
        assert (np.asarray(through) == direct).all(), rel



def as_bloscfs_shows(raw):
    """`numpy.save`'s bytes `raw` as bloscfs presents them: when the data is
    longer than 4096 bytes, the header padded with spaces to a multiple of
    4096 (the data starts on a page), unless that takes it past the 10,000
    bytes np.load reads untrusted."""
    pre = 10 if raw[6] == 1 else 12
    hl = int.from_bytes(raw[8:pre], "little")
    total = -(-(pre + hl) // 4096) * 4096
    if len(raw) - pre - hl <= 4096 or total - pre > 10000:
        return raw
    head = raw[:8] + (total - pre).to_bytes(pre - 8, "little") + raw[pre:pre + hl - 1]
    return head + b" " * (total - pre - hl) + b"\n" + raw[pre + hl:]


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
        same_through_mount(rel_w, w, rel, want.dtype.kind in "fc")
        arrays += 1
        assert os.path.exists(npy), npy
        whole = np.load(npy)
        assert whole.dtype == want.dtype and whole.shape == want.shape, (npy, whole.dtype, whole.shape)
        assert np.array_equal(whole, want, equal_nan=want.dtype.kind in "fc"), npy
        mm = np.load(npy, mmap_mode="r")
        assert np.array_equal(np.asarray(mm), want, equal_nan=want.dtype.kind in "fc"), npy
        del mm
        raw = as_bloscfs_shows(open(want_path, "rb").read())
        fd = os.open(npy, os.O_RDONLY)
        try:
            assert os.fstat(fd).st_size == len(raw), npy
            for _ in range(20):
                off = rng.randrange(len(raw))
                n = rng.randint(1, 5000)
                assert os.pread(fd, n, off) == raw[off:off + n], (npy, off, n)
        finally:
            os.close(fd)
    for a in json.load(open(manifest)).get("unsupported", []):
        rel = a["path"]
        assert not os.path.exists(f"{mp}/{rel_w}/stores/{rel}.npy"), rel
        same_through_mount(rel_w, w, rel, False)
        arrays += 1
assert arrays >= 40, arrays
print("ok", arrays, "arrays")
