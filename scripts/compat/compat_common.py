"""Shared by the cross-version fixture writers (see gen_compat.py): where
fixtures go, the manifest entries, source data and the chunk oracle."""

import hashlib
import io
import os
import random

import numpy as np


class State:
    """Where the fixtures go, how many, and who writes them."""
    out = None
    full = True
    producer = {}


S = State()
MANIFEST, SKIPPED, UNDECODABLE = [], [], []
RNG = np.random.default_rng(20261124)
PICK = random.Random(18)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def record(path, expected, kind, expect="ok", **params):
    entry = {"path": os.path.relpath(path, S.out), "kind": kind, "expect": expect, "params": params}
    if expect == "ok":
        entry["len"] = len(expected)
        entry["sha256"] = sha(expected)
    MANIFEST.append(entry)


def skip(what, why):
    SKIPPED.append({"case": what, "reason": str(why)[:300]})


def npy_bytes(arr):
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def sample(items, k_full, k_sample):
    items = list(items)
    k = k_full if S.full else k_sample
    return items if len(items) <= k else PICK.sample(items, k)


def size(full_choices, sample_choices):
    return PICK.choice(full_choices if S.full else sample_choices)


def data_for(ts, nbytes, flavour):
    """Realistic content of `nbytes` bytes for typesize `ts`."""
    n = nbytes // max(ts, 1) + 2
    if flavour == "series":
        raw = (np.cumsum(RNG.normal(size=n)) * 1000).astype("<f8").tobytes()
    elif flavour == "counter":
        raw = (np.arange(n, dtype="<i8") * 3 + 7).tobytes()
    elif flavour == "random":
        raw = RNG.integers(0, 256, size=n * ts + 16, dtype=np.uint8).tobytes()
    elif flavour == "text":
        words = [b"climate", b"detector", b"tensor", b"blosc", b"chunk", b"\n", b" "]
        raw = b" ".join(PICK.choice(words) for _ in range(nbytes // 4 + 8))
    else:  # mostly constant
        a = np.zeros(n * ts, dtype=np.uint8)
        a[::997] = 3
        raw = a.tobytes()
    return (raw * (nbytes // max(len(raw), 1) + 1))[:nbytes]


def flavour():
    return PICK.choice(["series", "counter", "random", "text", "const"])


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def tail_only(ref, src, ts):
    """True if `ref` differs from `src` only in the last < ts bytes."""
    if len(ref) != len(src):
        return False
    diff = [i for i in range(max(len(src) - ts, 0), len(src)) if ref[i] != src[i]]
    return ref[:len(src) - ts] == src[:len(src) - ts] and len(diff) > 0


def chunk_oracle(p, ch, ref, src, ts, delta, kind, lossy=False, **params):
    """Record a chunk whose writer decoded it to `ref` from source `src`
    (`ref` is None if the writer's decoder fails on it)."""
    if ref is None and lossy:
        skip(os.path.relpath(p, S.out), "lossy chunk the writer's own decoder fails on")
    elif ref is None:
        write(p, ch)
        UNDECODABLE.append({"path": os.path.relpath(p, S.out), "kind": kind, "params": params,
                            "reason": "the writer's own decoder fails on it",
                            "written_len": len(src), "written_sha256": sha(src)})
    elif lossy and len(ref) == len(src) and len(src) % ts and ref[-(len(src) % ts):] != src[-(len(src) % ts):]:
        # The writer's decoder leaves a trailing partial element unwritten,
        # and what the chunk stores there went through the lossy filter: no
        # oracle for those bytes.
        skip(os.path.relpath(p, S.out), "lossy chunk whose trailing partial element the writer leaves unwritten")
    elif ref == src or (lossy and len(ref) == len(src)):
        write(p, ch)
        record(p, ref, kind, **params)
    elif delta:
        # The encoder never writes the tail of a delta block that is not whole
        # elements: what any decoder returns there is undefined.
        skip(os.path.relpath(p, S.out), "delta chunk with an undefined tail")
    elif tail_only(ref, src, ts):
        # The writer's decoder leaves the trailing blocksize % typesize bytes
        # of a split block unwritten; the chunk stores the original bytes.
        write(p, ch)
        record(p, src, kind, note="writer's decoder leaves the tail of a split block unwritten", **params)
    else:
        write(p, ch)
        bad = next(i for i in range(min(len(ref), len(src))) if ref[i] != src[i]) if len(ref) == len(src) else -1
        UNDECODABLE.append({"path": os.path.relpath(p, S.out), "kind": kind, "params": params,
                            "reason": f"the writer's own decoder returns other bytes than were written "
                                      f"(first difference at byte {bad} of {len(src)})",
                            "written_len": len(src), "written_sha256": sha(src)})


def try_import(name):
    import importlib
    try:
        return importlib.import_module(name)
    except Exception:
        return None
