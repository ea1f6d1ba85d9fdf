#!/usr/bin/env bash
# Seed fuzz/corpus/TARGET from the committed fixtures (idempotent).
#   scripts/fuzz_seed.sh TARGET
# Every target gets the fixture files; `sparse_frame` also gets each
# sparse-frame fixture directory joined into one input (index, then chunk
# files, separated as fuzz/fuzz_targets/sparse_frame.rs expects); `codecs`
# also gets one valid stream per codec if python-blosc2 is available
# (.venv/bin/python, or $PYTHON), and `zfp` ZFP block streams likewise.
set -euo pipefail
cd "$(dirname "$0")/.."
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
            for f in "$d"/*.chunk; do printf '\n--chunk--\n'; cat "$f"; done
        } >"$out"
    done
    ;;
codecs)
    py=${PYTHON:-.venv/bin/python}
    if [ -x "$py" ] || command -v "$py" >/dev/null 2>&1; then
        "$py" scripts/fuzz_codec_seeds.py "$c" || echo "warning: codec seeds not generated" >&2
    fi
    ;;
zfp)
    py=${PYTHON:-.venv/bin/python}
    if [ -x "$py" ] || command -v "$py" >/dev/null 2>&1; then
        "$py" scripts/fuzz_zfp_seeds.py "$c" || echo "warning: zfp seeds not generated" >&2
    fi
    ;;
esac
