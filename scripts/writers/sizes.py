#!/usr/bin/env python3
"""Write Blosc2 frames whose chunks differ in size, with the python-blosc2
release this runs under, to tests/fixtures/writers/sizes/<release>/.

python-blosc2 2.2 to 4.0 (C-Blosc2 2.x) keep a frame's fixed chunk size in its
header when a shorter chunk is appended or inserted anywhere but at the end:
the header's chunk size then says nothing about where later chunks start.
Later releases switch such a frame to variable chunk sizes (chunk size 0).

Run it once per release, each from its own venv, e.g.:
    /work/venvs/b2-2.2.9/bin/python scripts/writers/sizes.py
    (blosc2==2.2.9, 2.5.1 with numpy<2; 3.0.0; 4.0.0; 4.14.1)

Each release's directory gets `manifest.json`: per frame, the header's size,
the size of every chunk as the writer reads it back (`decompress_chunk(i)`),
and the SHA-256 of their concatenation, the content bloscfs must serve. Where
the writer's own reader returns fewer bytes than the frame declares (it lost
track of a chunk while writing) the frame is marked "refuse": no reader can
serve it consistently, and bloscfs must refuse it with a clear error.
`schunk[:]` is no oracle here: 2.2-4.0 raise on these frames, 4.14 divides
by the chunk size 0.
"""

import hashlib
import json
import os
import shutil

import blosc2
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "writers", "sizes", blosc2.__version__)
N = 16_000  # a full chunk: 4,000 int32, in blocks of 4 KiB

# name: (operations, what they do). ("a", n): append n bytes; ("i", k, n):
# insert n bytes as chunk k; ("u", k, n): replace chunk k by n bytes.
CASES = {
    "mid": [("a", N), ("a", N), ("a", 4_000), ("a", N), ("a", N), ("a", 14_000)],
    "start": [("a", 4_800), ("a", N), ("a", N)],
    "several": [("a", N), ("a", 12_000), ("a", N), ("a", 14_000), ("a", N), ("a", N)],
    "insert": [("a", N), ("a", N), ("a", N), ("i", 1, 6_400)],
    # 2.2-4.0 refuse this one; later releases make the frame variable.
    "update": [("a", N), ("a", N), ("a", N), ("u", 1, 3_200)],
    # Two short chunks whose shortfall adds up to more than a chunk: 2.x
    # counts chunks as nbytes / chunksize and loses one while writing.
    "lost": [("a", N), ("a", 4_800), ("a", N), ("a", 1_600), ("a", N), ("a", 8_000)],
}


def data(k, n):
    # Each value says which write and which element it is.
    return (np.arange(n // 4, dtype="<i4") * 3 + 100_000 * k).tobytes()


def remove(p):
    if os.path.isdir(p):
        shutil.rmtree(p)
    elif os.path.exists(p):
        os.remove(p)


def write(name, ops, contiguous):
    p = os.path.join(OUT, name)
    remove(p)
    cparams = {"typesize": 4, "codec": blosc2.Codec.LZ4, "clevel": 5, "blocksize": 4096}
    s = blosc2.SChunk(chunksize=N, contiguous=contiguous, urlpath=p, cparams=cparams)
    for k, op in enumerate(ops):
        if op[0] == "a":
            s.append_data(data(k, op[1]))
        elif op[0] == "i":
            s.insert_data(op[1], data(k, op[2]), True)
        else:
            s.update_data(op[1], data(k, op[2]), True)
    del s
    return p


def main():
    os.makedirs(OUT, exist_ok=True)
    files = []
    for case, ops in CASES.items():
        for contiguous in (True, False):
            name = f"{case}-{'c' if contiguous else 's'}.b2frame"
            try:
                p = write(name, ops, contiguous)
            except RuntimeError as e:
                print(blosc2.__version__, name, "not written:", e)
                remove(os.path.join(OUT, name))
                continue
            s = blosc2.open(p)
            nbytes, chunksize = s.nbytes, s.chunksize
            parts = [s.decompress_chunk(i) for i in range(s.nchunks)]
            content = b"".join(parts)
            files.append({
                "path": name,
                "kind": "frame" if contiguous else "sframe",
                "nbytes": nbytes,
                "chunksize": chunksize,
                "chunks": [len(c) for c in parts],
                "len": len(content),
                "sha256": hashlib.sha256(content).hexdigest(),
                "expect": "ok" if len(content) == nbytes else "refuse",
            })
            print(blosc2.__version__, name, files[-1]["chunks"], nbytes, chunksize, files[-1]["expect"])
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"producer": {"blosc2": blosc2.__version__, "c-blosc2": blosc2.blosclib_version,
                                "numpy": np.__version__}, "files": files}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
