#!/usr/bin/env python3
"""Write the reference-made files of crates/blosc-decode/tests/regress.rs to tests/fixtures/regress/.

Run with the project venv:  .venv/bin/python scripts/gen_regress_fixtures.py

These are frames python-blosc2 (C-Blosc2) writes whose chunk tables stress
the frame opener: millions of special chunks in a few bytes, NaN chunks whose
size is not a multiple of 8, special kinds that change chunk by chunk. The
other inputs in that directory are minimised fuzzer inputs, not made here.
"""

import os

import blosc2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "regress")
SV = blosc2.SpecialValue


def frame(name, chunksize, typesize):
    """A super-chunk backed by a new contiguous frame file (a frame-backed
    fill_special writes the special offsets at once; in memory it makes
    every chunk, 180 us each)."""
    path = os.path.join(OUT, name)
    if os.path.exists(path):
        os.remove(path)
    return blosc2.SChunk(
        chunksize=chunksize, cparams={"typesize": typesize}, urlpath=path, contiguous=True
    )


def main():
    # 1 TiB of zeros: 2^24 - 1 chunks of 64 KiB, 172 bytes.
    frame("frame-zeros-16m-chunks.b2frame", 65536, 8).fill_special(
        ((1 << 24) - 1) * 8192, SV.ZERO
    )

    # NaN float32 chunks of 3 items (12 bytes, not a multiple of 8).
    frame("frame-nan-f32-12-byte-chunks.b2frame", 12, 4).fill_special(3 * 20000, SV.NAN)

    # Zero and NaN chunks alternating, appended as the special chunks
    # C-Blosc2 makes (fill_special needs an empty super-chunk).
    kinds = []
    for kind in (SV.ZERO, SV.NAN):
        s = blosc2.SChunk(chunksize=65536, cparams={"typesize": 8})
        s.fill_special(8192, kind)
        kinds.append(s.get_chunk(0))
    for n in (1000, 68000):
        s = frame(f"frame-alternating-specials-{n}.b2frame", 65536, 8)
        for i in range(n):
            s.append_chunk(kinds[i % 2])
        del s


if __name__ == "__main__":
    main()
