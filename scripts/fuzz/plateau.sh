#!/usr/bin/env bash
# Fuzzing campaign: run fuzz targets one after the other (one process, never
# two at once) for SECONDS each, then print a coverage table from the logs.
#
#   scripts/fuzz/plateau.sh SECONDS [TARGET...]   run (default: every target)
#   scripts/fuzz/plateau.sh --table [TARGET...]   only print the table
#
# Logs go to $FUZZ_LOGS (default /tmp/bloscfs-fuzz), one TARGET.log each,
# every libFuzzer line prefixed with the seconds elapsed. A target has
# plateaued when its coverage ("cov") stopped growing well before the end
# (the "no new cov" column). A crash, timeout or OOM does not stop the
# campaign: it is reported and its input left in fuzz/artifacts/TARGET/.
# FUZZ_TIMEOUT (default 10) is libFuzzer's per-input timeout in seconds; on
# a loaded machine a stalled process can trip 10 s (reproduce before
# believing a timeout: run the target binary on the artifact alone).
# FUZZ_BUILD (default "-O") are cargo fuzz's build flags: "-O -a" adds debug
# assertions and overflow checks, so an integer overflow is a crash.
# FUZZ_FORK=N runs libFuzzer's fork mode with N worker processes (one per
# core): a crash, timeout or OOM is saved and counted, and fuzzing goes on.
# Each target starts from its committed corpus (fuzz/corpora/TARGET.tar.xz,
# see scripts/fuzz/corpus.sh) plus the seeds, and its corpus is packed there
# again at the end: commit it to go on from there next time.
# Not for CI (CI runs scripts/fuzz/run.sh 20).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
logs=${FUZZ_LOGS:-/tmp/bloscfs-fuzz}
mkdir -p "$logs"

table() {
    printf '| target | seconds | execs | exec/s | cov | ft | corpus | last new cov at (s) | no new cov for (s) | result |\n'
    printf '|---|---|---|---|---|---|---|---|---|---|\n'
    for t in "$@"; do
        f="$logs/$t.log"
        [ -f "$f" ] || continue
        awk -v t="$t" '
            # "SECS #N NEW cov: C ft: F corp: K/..." (SECS added by this script)
            # In fork mode: "SECS #N: cov: C ft: F corp: K exec/s: E
            # oom/timeout/crash: O/T/C time: ..." (no INITED line).
            $2 ~ /^#[0-9]+:?$/ {
                for (i = 3; i <= NF; i++) {
                    if ($i == "cov:") c = $(i + 1) + 0
                    if ($i == "ft:") ft = $(i + 1) + 0
                    if ($i == "corp:") { split($(i + 1), a, "/"); corp = a[1] }
                    if ($i == "oom/timeout/crash:") { split($(i + 1), a, "/"); if (a[1] + a[2] + a[3] > 0) bad = 1 }
                }
                if ($3 == "INITED" || ($2 ~ /:$/ && !forked)) { t0 = $1; lastcov = $1; forked = ($2 ~ /:$/) }
                if (c > cov) { cov = c; lastcov = $1 }
            }
            /stat::number_of_executed_units:/ { execs = $NF }
            /stat::average_exec_per_sec:/ { eps = $NF }
            /^[0-9]+ (==[0-9]+== ?ERROR|.*panicked at|.*deadly signal|.*ALARM: working on the last Unit|.*out-of-memory)/ { bad = 1 }
            /Test unit written to/ { art = $NF }
            { end = $1 }
            END {
                res = bad ? "CRASH " art : "ok"
                # Times are counted from INITED (the corpus loaded), not the build.
                printf "| %s | %d | %s | %s | %d | %d | %s | %d | %d | %s |\n", t, end - t0, execs, eps, cov, ft, corp, lastcov - t0, end - lastcov, res
            }' "$f"
    done
}

if [ "${1:-}" = "--table" ]; then
    shift
    [ $# -gt 0 ] || set -- $(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz list)
    table "$@"
    exit 0
fi

secs=${1:?usage: scripts/fuzz/plateau.sh SECONDS [TARGET...] | --table [TARGET...]}
shift
command -v cargo-fuzz >/dev/null || cargo install -q cargo-fuzz
export RUSTC_BOOTSTRAP=1
build=${FUZZ_BUILD:--O}
fork=()
[ -z "${FUZZ_FORK:-}" ] || fork=(-fork="$FUZZ_FORK" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
# shellcheck disable=SC2086 # word splitting of the flags is wanted
(cd fuzz && cargo fuzz build $build >/dev/null)
[ $# -gt 0 ] || set -- $(cd fuzz && cargo fuzz list)
for t in "$@"; do
    scripts/fuzz/corpus.sh restore "$t"
    scripts/fuzz/seed.sh "$t"
    echo "-- fuzz $t (${secs}s, $build) -> $logs/$t.log"
    (
        cd fuzz
        SECONDS=0
        # shellcheck disable=SC2086
        cargo fuzz run $build "$t" "corpus/$t" -- \
            -max_total_time="$secs" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -malloc_limit_mb=2048 \
            -max_len=1048576 -print_final_stats=1 "${fork[@]}" 2>&1 \
            | while IFS= read -r l; do printf '%d %s\n' "$SECONDS" "$l"; done
    ) >"$logs/$t.log" || true
    # The sparse_frame target writes its files under a per-process temp dir.
    # Only the directories of processes that are gone: a run of another
    # target in parallel may be using its own (removing it once made a
    # write there fail and look like a crash).
    for d in /dev/shm/bloscfs-fuzz-sframe-* "${TMPDIR:-/tmp}"/bloscfs-fuzz-sframe-* /tmp/bloscfs-fuzz-sframe-*; do
        if [ -e "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null; then rm -rf "$d"; fi
    done
    scripts/fuzz/corpus.sh save "$t"
    table "$t" | tail -1
done
echo
table "$@"
