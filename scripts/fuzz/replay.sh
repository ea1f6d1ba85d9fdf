#!/usr/bin/env bash
# Replayed coverage of a fuzz corpus as it stood at given times: a plateau
# check that does not count coverage a run only saw by chance.
#
#   scripts/fuzz/replay.sh TARGET [WHEN...]     (WHEN: a date(1) time, or "now")
#
# The corpus as it stood at WHEN is the files of fuzz/corpus/TARGET written
# no later than WHEN (libFuzzer writes each input once, when it is found).
# Each set is loaded REPLAYS times (default 3) by the built target binary
# with -runs=0, and the coverage libFuzzer reports after loading it
# ("INITED cov: ... ft: ...") is printed. A run's "cov" column counts every
# edge it ever saw, including edges some inputs reach only on some runs
# (threads, hash seeds, temporary paths): loading the same corpus twice can
# differ by a few edges, or by tens for sparse_frame. If the corpus at the
# start of a run's last third replays to the same coverage as the final
# corpus, within that spread, the last third found nothing new. (A reduced
# input replaces the file it came from, so an earlier set can only replay
# lower than the corpus really did then: the check errs towards "still
# growing".)
#
# Needs the target built (scripts/fuzz/plateau.sh or cargo fuzz build).
set -euo pipefail
cd "$(dirname "$0")/../.."
t=${1:?usage: scripts/fuzz/replay.sh TARGET [WHEN...]}
shift
[ $# -gt 0 ] || set -- now
bin=fuzz/target/x86_64-unknown-linux-gnu/release/$t
[ -x "$bin" ] || { echo "$bin missing: build the fuzz targets first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for when in "$@"; do
    rm -rf "$tmp/c" && mkdir "$tmp/c"
    if [ "$when" = now ]; then
        cp fuzz/corpus/"$t"/* "$tmp/c/"
    else
        find fuzz/corpus/"$t" -type f ! -newermt "$when" -exec cp {} "$tmp/c/" \;
    fi
    n=$(find "$tmp/c" -type f | wc -l)
    covs=""
    for _ in $(seq "${REPLAYS:-3}"); do
        "$bin" "$tmp/c" -runs=0 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=1048576 >"$tmp/log" 2>&1 || true
        c=$(grep -m1 INITED "$tmp/log" | sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+).*/\1\/\2/')
        covs="$covs $c"
    done
    echo "$t at $when: $n files; replayed cov/ft:$covs"
done
