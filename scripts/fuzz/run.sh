#!/usr/bin/env bash
# Run every fuzz target for N seconds (default 60), seeded from the fixtures.
# Any crash fails the run; the crashing input is left in fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo-fuzz >/dev/null || cargo install -q cargo-fuzz
export RUSTC_BOOTSTRAP=1
(cd fuzz && cargo fuzz build -O >/dev/null)
for t in $(cd fuzz && cargo fuzz list); do
    # Seed every corpus with the committed reference fixtures.
    scripts/fuzz/seed.sh "$t"
    echo "-- fuzz $t (${secs}s)"
    (cd fuzz && cargo fuzz run -O "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -max_len=1048576 2>&1 \
        | grep -E "^(#[0-9]+ +DONE|Done|==[0-9]+==ERROR|SUMMARY)|panicked" || true)
    # sparse_frame writes its files under a per-process directory.
    # Only the directories of processes that are gone: a run of another
    # target in parallel may be using its own (removing it once made a
    # write there fail and look like a crash).
    for d in /dev/shm/bloscfs-fuzz-sframe-* "${TMPDIR:-/tmp}"/bloscfs-fuzz-sframe-* /tmp/bloscfs-fuzz-sframe-*; do
        if [ -e "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null; then rm -rf "$d"; fi
    done
    [ -z "$(ls -A "fuzz/artifacts/$t" 2>/dev/null)" ] || { echo "FAIL: fuzz target $t found a crash: fuzz/artifacts/$t"; exit 1; }
done
