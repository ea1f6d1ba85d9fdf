#!/usr/bin/env bash
# The cross-version fixture matrix: one venv per release set of older
# producers (scripts/compat/requirements/NAME.txt, fully pinned, wheels for
# CPython 3.11 only), made once with uv under .venv-compat/NAME and kept while
# its requirements file is unchanged; each writes OUTDIR/NAME with its
# manifest (scripts/compat/gen_compat.py), then the newest reference (.venv, from
# scripts/setup.sh) notes where it reads a file otherwise.
#   scripts/compat/compat.sh OUTDIR             the whole matrix (CI)
#   scripts/compat/compat.sh OUTDIR --sample    the small subset kept in tests/fixtures/compat
# A venv that cannot be made is a failure, never a skip.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: scripts/compat/compat.sh OUTDIR [--sample]}
shift
mode=("$@")
fail() { echo "FAIL: $*" >&2; exit 1; }

py=$(command -v python3.11 || command -v python3 || true)
[ -n "$py" ] && "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
    || fail "the compat venvs need CPython 3.11 (their wheels are cp311)"
[ -x .venv/bin/python ] || fail ".venv missing: run scripts/setup.sh first"
root=.venv-compat
uv=$root/_uv/bin/uv
export UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1
if [ ! -x "$uv" ]; then
    rm -rf "$root/_uv"
    "$py" -m venv "$root/_uv" || fail "cannot make the uv bootstrap venv"
    "$root/_uv/bin/pip" install -q --disable-pip-version-check uv==0.13.9 || fail "cannot install uv"
fi

start=$SECONDS
for req in scripts/compat/requirements/*.txt; do
    name=$(basename "$req" .txt)
    venv=$root/$name
    if ! cmp -s "$req" "$venv/.installed-requirements"; then
        echo "== venv $name"
        rm -rf "$venv"
        "$uv" venv -q --python "$py" "$venv" || fail "cannot make venv $name"
        "$uv" pip install -q --python "$venv/bin/python" --only-binary :all: -r "$req" \
            || fail "cannot install $req into $venv (wheels for CPython 3.11 only)"
        cp "$req" "$venv/.installed-requirements"
    fi
done
echo "== compat venvs ready in $((SECONDS - start)) s"

rm -rf "$out"
mkdir -p "$out"
for req in scripts/compat/requirements/*.txt; do
    name=$(basename "$req" .txt)
    producers=$(sed -n 's/^# producers: //p' "$req")
    "$root/$name/bin/python" -W ignore scripts/compat/gen_compat.py "$out/$name" --producers="$producers" \
        ${mode[@]+"${mode[@]}"} || fail "gen_compat.py failed in venv $name"
done
.venv/bin/python -W ignore scripts/compat/gen_compat.py --crosscheck "$out"/*/ || fail "cross-check failed"
echo "== compat matrix written to $out in $((SECONDS - start)) s ($(du -sh "$out" | cut -f1))"
