#!/usr/bin/env bash
# Seed fuzz/corpus/TARGET from the committed fixtures (idempotent).
#   scripts/fuzz/seed.sh TARGET
# Every target gets the fixture files; `sparse_frame` also gets each
# sparse-frame fixture directory joined into one input (index, then chunk
# files, separated as fuzz/fuzz_targets/sparse_frame.rs expects); `codecs`
# also gets one valid stream per codec if python-blosc2 is available
# (.venv/bin/python, or $PYTHON), and `zfp` ZFP block streams likewise;
# `npy_layout` also gets every dtype text of
# tests/fixtures/writers/dtype/descrs-*.json; `remote_listing` a URL, a
# manifest, an S3 XML listing and a Caterva2 list (each after its selector
# byte).
set -euo pipefail
cd "$(dirname "$0")/../.."
t=$1
c="fuzz/corpus/$t"
mkdir -p "$c"
{ find tests/fixtures -type f ! -name '*.json' -size -2M || true; } \
    | head -400 | while read -r f; do cp -n "$f" "$c/$(echo "$f" | tr / _)" || true; done
case "$t" in
sparse_frame)
    for d in $(find tests/fixtures -type f -name chunks.b2frame -exec dirname {} \;); do
        out="$c/sframe_$(echo "$d" | tr / _)"
        [ -e "$out" ] && continue
        {
            cat "$d/chunks.b2frame"
            for f in "$d"/*.chunk; do [ -e "$f" ] || continue; printf '\n--chunk--\n'; cat "$f"; done
        } >"$out"
    done
    ;;
npy_layout)
    # Every stored dtype text of the descr tables, after eight zero bytes
    # (no dimensions, itemsize, start and length 0): the rest is the text.
    for j in tests/fixtures/writers/dtype/descrs-*.json; do
        [ -e "$j" ] || continue
        python3 - "$j" "$c" <<'PY' || echo "warning: dtype seeds not generated" >&2
import hashlib, json, sys
for row in json.load(open(sys.argv[1]))["dtypes"]:
    data = bytes(8) + row["text"].encode()
    open(f"{sys.argv[2]}/dtype-{hashlib.sha1(data).hexdigest()[:12]}", "wb").write(data)
PY
    done
    ;;
zarr_meta)
    # Every array's metadata the Zarr fixtures hold, behind the flag byte
    # (0: a v3 `zarr.json`, 1: a v2 `.zarray`).
    find tests/fixtures/zarr -name zarr.json -o -name .zarray | while read -r f; do
        case "$f" in *.zarray) flag='\1' ;; *) flag='\0' ;; esac
        out="$c/meta_$(echo "$f" | tr / _)"
        [ -e "$out" ] || { printf "$flag"; cat "$f"; } >"$out"
    done
    # And each array with one of its chunks after the separator, so that
    # the codecs' decoding starts from streams the writers made.
    python3 - "$c" <<'PY' || echo "warning: zarr chunk seeds not generated" >&2
import os, sys
for root, dirs, files in os.walk("tests/fixtures/zarr"):
    for meta, flag in ((".zarray", b"\1"), ("zarr.json", b"\0")):
        if meta not in files:
            continue
        chunks = []
        for r2, d2, f2 in os.walk(root):
            if r2 != root and ({".zarray", ".zgroup", "zarr.json"} & set(f2)):
                d2[:] = []
                continue
            chunks += [os.path.join(r2, f) for f in f2 if not f.startswith(".") and f != "zarr.json"]
        if chunks:
            chunk = sorted(chunks)[0]
            name = "chunk_" + chunk.replace("/", "_")
            out = os.path.join(sys.argv[1], name)
            if not os.path.exists(out):
                with open(out, "wb") as o:
                    o.write(flag + open(os.path.join(root, meta), "rb").read())
                    o.write(b"\n--chunk--\n" + open(chunk, "rb").read())
PY
    ;;
remote_listing)
    printf '\0# comment\n12 a/b.b2frame\nc d.b2nd\n' >"$c/manifest"
    printf '\1<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t&amp;1</NextContinuationToken><Contents><Key>d/x</Key><Size>3</Size><ETag>&quot;a&quot;</ETag><LastModified>2024-01-02T03:04:05.000Z</LastModified></Contents><CommonPrefixes><Prefix>d/s/</Prefix></CommonPrefixes></ListBucketResult>' >"$c/xml"
    printf '\2["a.b2nd", "d/e.b2frame", "../x"]' >"$c/caterva2"
    printf '\3caterva2://127.0.0.1:8000/@public/dir/x.b2nd' >"$c/url-c2"
    printf '\3s3://bucket/some//prefix/' >"$c/url-s3"
    ;;
codecs)
    py=${PYTHON:-.venv/bin/python}
    if [ -x "$py" ] || command -v "$py" >/dev/null 2>&1; then
        "$py" scripts/fuzz/codec_seeds.py "$c" || echo "warning: codec seeds not generated" >&2
    fi
    ;;
zfp)
    py=${PYTHON:-.venv/bin/python}
    if [ -x "$py" ] || command -v "$py" >/dev/null 2>&1; then
        "$py" scripts/fuzz/zfp_seeds.py "$c" || echo "warning: zfp seeds not generated" >&2
    fi
    ;;
esac
