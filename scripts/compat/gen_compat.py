#!/usr/bin/env python3
"""Write the cross-version fixture matrix with whatever producers this venv has.

    gen_compat.py OUTDIR [--sample] [--producers=a,b]   write fixtures and
                                         OUTDIR/manifest.json
    gen_compat.py --crosscheck DIR...    read every fixture of DIR/manifest.json
                                         with this venv's python-blosc2 (the
                                         newest reference) and add a note where
                                         it disagrees

Runs inside each venv that scripts/compat/compat.sh makes (one release set each), so
it imports nothing of the project's and only what that venv holds:
python-blosc2 (chunks, frames, sparse frames, special chunks, dictionaries,
b2nd arrays), python-blosc (Blosc1 chunks), numcodecs and zarr v2/v3 (chunk
files are Blosc chunks; metadata and shard files are not containers),
imagecodecs (Blosc and Blosc2 chunks) and hdf5plugin + h5py (the raw chunks
h5py's read_direct_chunk returns: Blosc1 chunks, or b2nd frames for the Blosc2
filter). The manifest has the format of tests/fixtures/manifest.json: for each
file, what bloscfs must present (length and SHA-256), from the writer's own
decoder checked against the data written. Files the writer's own decoder
cannot read go to the manifest's "undecodable" list with the SHA-256 of the
data written: a reader must fail on them cleanly or present exactly that
data. Without --sample the whole matrix is written (CI); with it a small
deterministic subset (committed in tests/fixtures/compat).
"""

import json
import os
import shutil
import sys

import numpy as np

import compat_common as cc
from compat_blosc1 import hdf5_chunks, imagecodecs_chunks, numcodecs_chunks, pyblosc_chunks, zarr_arrays
from compat_blosc2 import b2_arrays, b2_chunks, b2_frames
from compat_common import PICK, RNG, S, try_import


def run(step, producer, *mods):
    PICK.seed(step.__name__)
    RNG.bit_generator.state = np.random.default_rng(sum(map(ord, step.__name__))).bit_generator.state
    S.producer = {"producer": producer}
    step(*mods)


def generate(wanted):
    producers = {"numpy": np.__version__}
    if "blosc2" in wanted:
        b2 = try_import("blosc2")
        v = f"python-blosc2 {b2.__version__} (C-Blosc2 {b2.blosclib_version.split()[0]})"
        producers["blosc2"] = v
        for step in (b2_chunks, b2_frames, b2_arrays):
            run(step, v, b2)
    if "blosc" in wanted:
        bl = try_import("blosc")
        v = f"python-blosc {bl.__version__} (C-Blosc {bl.blosclib_version.split()[0]})"
        producers["blosc"] = v
        run(pyblosc_chunks, v, bl)
    if "numcodecs" in wanted:
        nc, zarr = try_import("numcodecs"), try_import("zarr")
        from numcodecs import blosc as nb
        v = f"numcodecs {nc.__version__} (C-Blosc {nb.VERSION_STRING})"
        producers["numcodecs"] = v
        run(numcodecs_chunks, v, nc)
        if zarr is not None:
            producers["zarr"] = f"zarr {zarr.__version__}"
            run(zarr_arrays, f"zarr {zarr.__version__}, {v}", zarr, nc)
    if "imagecodecs" in wanted:
        ic = try_import("imagecodecs")
        v = f"imagecodecs {ic.__version__} ({ic.blosc_version()}, {ic.blosc2_version()})"
        producers["imagecodecs"] = v
        run(imagecodecs_chunks, v, ic)
    if "hdf5" in wanted:
        h5py, hp = try_import("h5py"), try_import("hdf5plugin")
        v = f"hdf5plugin {hp.version} + h5py {h5py.__version__} (HDF5 {h5py.version.hdf5_version})"
        producers["hdf5plugin"] = v
        run(hdf5_chunks, v, h5py, hp)
    return producers


def newest_read(blosc2, path, entry):
    """What the newest python-blosc2 presents for a fixture, as bloscfs would."""
    kind, params = entry["kind"], entry["params"]
    if kind in ("blosc1-chunk", "blosc2-chunk"):
        return bytes(blosc2.decompress2(open(path, "rb").read()))
    if kind == "b2nd":
        a = blosc2.ndarray_from_cframe(open(path, "rb").read()) if path.endswith(".chunk") else blosc2.open(path)
        return cc.npy_bytes(np.asarray(a[()] if a.ndim == 0 else a[...]))
    s = blosc2.open(path)
    s = getattr(s, "schunk", s)
    ref = b"".join(bytes(s.decompress_chunk(i)) for i in range(s.nchunks))
    return bytes(len(ref)) if params.get("special") == "UNINIT" else ref


def crosscheck(dirs):
    """Note, in each manifest, where the newest python-blosc2 disagrees."""
    import blosc2
    who = f"python-blosc2 {blosc2.__version__}"
    for d in dirs:
        mpath = os.path.join(d, "manifest.json")
        m = json.load(open(mpath))
        differ = 0
        for e in m["fixtures"] + m["undecodable"]:
            if e.get("expect", "ok") != "ok":
                continue
            want = (e.get("len"), e.get("sha256")) if "sha256" in e else (e["written_len"], e["written_sha256"])
            try:
                got = newest_read(blosc2, os.path.join(d, e["path"]), e)
                same = (len(got), cc.sha(got)) == want
                why = f"{who} reads {len(got)} bytes, other than expected"
            except Exception as ex:
                same, why = False, f"{who} fails on it: {str(ex)[:120]}"
            if "sha256" not in e:
                e["newest_reference"] = "reads the data written" if same else why
            elif not same:
                e["params"]["newest_reference"] = why
                differ += 1
        m["producers"]["crosschecked_with"] = who
        with open(mpath, "w") as f:
            json.dump(m, f, indent=1)
        print(f"{d}: {differ} of {len(m['fixtures'])} fixtures read otherwise by {who}")


def prune_sample(out, per_group=2):
    """Keep a few fixtures of each directory and kind (none of a known
    defect: the committed sample must pass) and delete the other files."""
    def disk(e):
        p = os.path.join(out, e["path"])
        if os.path.isdir(p):
            return sum(os.path.getsize(os.path.join(p, f)) for f in os.listdir(p))
        return os.path.getsize(p)

    keep, seen = [], {}
    for e in sorted(cc.MANIFEST, key=lambda e: (disk(e), e["path"])):
        group = (e["path"].split("/")[0], e["kind"], e["expect"])
        if "known_defect" not in e["params"] and seen.get(group, 0) < per_group and disk(e) < 40_000:
            seen[group] = seen.get(group, 0) + 1
            keep.append(e)
    cc.MANIFEST[:] = keep
    cc.UNDECODABLE[:] = sorted(cc.UNDECODABLE, key=lambda e: e["path"])[:per_group]
    kept = {e["path"] for e in keep + cc.UNDECODABLE}
    for dirpath, _dirs, files in os.walk(out, topdown=False):
        for fn in files:
            rel = os.path.relpath(os.path.join(dirpath, fn), out)
            if rel != "manifest.json" and not any(rel == k or rel.startswith(k + "/") for k in kept):
                os.remove(os.path.join(dirpath, fn))
        if dirpath != out and not os.listdir(dirpath):
            os.rmdir(dirpath)


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["--crosscheck"]:
        return crosscheck(argv[1:])
    S.full = "--sample" not in argv
    wanted = ["blosc2", "blosc", "numcodecs", "imagecodecs", "hdf5"]
    for a in argv:
        if a.startswith("--producers="):
            wanted = a.split("=", 1)[1].split(",")
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    S.out = os.path.abspath(args[0])
    shutil.rmtree(S.out, ignore_errors=True)
    os.makedirs(S.out)
    producers = generate(wanted)
    if not S.full:
        prune_sample(S.out)
    manifest = {"producers": producers, "full": S.full, "fixtures": cc.MANIFEST, "skipped": cc.SKIPPED,
                "undecodable": cc.UNDECODABLE}
    with open(os.path.join(S.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"{S.out}: {len(cc.MANIFEST)} fixtures, {len(cc.SKIPPED)} cases skipped, {len(cc.UNDECODABLE)} undecodable "
          f"({', '.join(producers.values())})")


if __name__ == "__main__":
    main()
