#!/usr/bin/env bash
# Keep fuzz corpora across machines: the inputs libFuzzer found (files named
# by their SHA-1; not the seeds, which scripts/fuzz/seed.sh copies again from
# the fixtures) are packed, with their times, into fuzz/corpora/TARGET.tar.xz,
# which is committed. A campaign then goes on where the last one stopped.
#
#   scripts/fuzz/corpus.sh save TARGET...      pack fuzz/corpus/TARGET
#   scripts/fuzz/corpus.sh restore TARGET...   unpack into fuzz/corpus/TARGET
#                                              (adds to what is there)
#
# scripts/fuzz/plateau.sh restores before it fuzzes; CI's short runs
# (scripts/fuzz/run.sh) start from the seeds only.
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:?usage: scripts/fuzz/corpus.sh save|restore TARGET...}
shift
for t in "$@"; do
    pack="fuzz/corpora/$t.tar.xz"
    dir="fuzz/corpus/$t"
    case "$what" in
    save)
        [ -d "$dir" ] || { echo "$dir missing" >&2; exit 1; }
        mkdir -p fuzz/corpora
        (cd "$dir" && find . -maxdepth 1 -type f -regextype posix-extended -regex '\./[0-9a-f]{40}' -printf '%P\n' | LC_ALL=C sort) \
            | tar -C "$dir" --owner=0 --group=0 --numeric-owner -cJf "$pack" -T -
        echo "$pack: $(tar -tJf "$pack" | wc -l) inputs, $(stat -c %s "$pack") bytes"
        ;;
    restore)
        [ -f "$pack" ] || { echo "no $pack: nothing to restore"; continue; }
        mkdir -p "$dir"
        tar -C "$dir" --no-same-owner -xJf "$pack"
        echo "$dir: restored $(tar -tJf "$pack" | wc -l) inputs from $pack"
        ;;
    *)
        echo "usage: scripts/fuzz/corpus.sh save|restore TARGET..." >&2
        exit 2
        ;;
    esac
done
