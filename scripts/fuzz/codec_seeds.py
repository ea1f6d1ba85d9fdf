#!/usr/bin/env python3
"""Seeds for the `codecs` fuzz target: one valid stream per codec.

Usage: scripts/fuzz/codec_seeds.py OUTDIR   (needs python-blosc2, as in .venv)

Input layout of the target (fuzz/fuzz_targets/codecs.rs): byte 0 selects
the codec (0 blosclz, 1 lz4, 2 lz4+dict, 3 snappy, 4 zlib, 5 zstd,
6 zstd+dict), bytes 1..4 the output size, then (dict cases) a u16 dict
length and the dict, then the stream. Streams are cut out of Blosc2 chunks
written by C-Blosc2 (one block, one stream, no filter); snappy, which
C-Blosc2 no longer writes, is hand-made.
"""
import os
import struct
import sys

import blosc2

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

samples = [
    (b"hello world, bloscfs fuzzing " * 200)[:4096],
    bytes(range(256)) * 16,
    bytes(i * 7 % 251 for i in range(3000)),
]


def stream(codec, data):
    c = blosc2.compress2(
        data,
        codec=codec,
        filters=[blosc2.Filter.NOFILTER],
        splitmode=blosc2.SplitMode.NEVER_SPLIT,
        typesize=1,
        blocksize=len(data),
    )
    flags = c[2]
    if flags & 0x02:  # memcpyed: no stream to cut out
        return None
    bstart = struct.unpack_from("<i", c, 32)[0]
    csize = struct.unpack_from("<i", c, bstart)[0]
    return c[bstart + 4 : bstart + 4 + csize]


def snappy(data):
    # varint length, then literals of at most 60 bytes, then one copy.
    n = len(data) + 8
    v = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        v.append(b | (0x80 if n else 0))
        if not n:
            break
    for i in range(0, len(data), 60):
        lit = data[i : i + 60]
        v.append((len(lit) - 1) << 2)
        v += lit
    v.append(((8 - 4) << 2) | 0x01)  # copy with 1-byte offset: len 8, offset 8
    v.append(8)
    return bytes(v), len(data) + 8


def emit(name, sel, out_len, body, dict_=None):
    head = bytes([sel]) + struct.pack("<I", out_len)[:3]
    if dict_ is not None:
        head += struct.pack("<H", len(dict_)) + dict_
    with open(os.path.join(out, name), "wb") as f:
        f.write(head + body)


codecs = [
    (0, "blosclz", blosc2.Codec.BLOSCLZ),
    (1, "lz4", blosc2.Codec.LZ4),
    (1, "lz4hc", blosc2.Codec.LZ4HC),
    (4, "zlib", blosc2.Codec.ZLIB),
    (5, "zstd", blosc2.Codec.ZSTD),
]
for k, data in enumerate(samples):
    for sel, name, codec in codecs:
        s = stream(codec, data)
        if s is None:
            continue
        emit(f"seed-{name}-{k}", sel, len(data), s)
        if sel in (1, 5):  # the same stream with a (raw) dictionary
            emit(f"seed-{name}-dict-{k}", sel + 1, len(data), s, samples[0][:256])
    body, n = snappy(data[:500])
    emit(f"seed-snappy-{k}", 3, n, body)
