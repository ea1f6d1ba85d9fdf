#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up, lint, the reference fixture
# matrix, unit/integration/mount tests, and a short run of every fuzz target.
#   scripts/test.sh            everything
#   FUZZ_SECONDS=0 scripts/test.sh   skip fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

echo "== reference fixture matrix (written by python-blosc2, python-blosc, bloscpack)"
rm -rf fixtures-full
.venv/bin/python scripts/fixtures/gen_fixtures.py fixtures-full --full
echo "== cross-version fixture matrix (older python-blosc2, python-blosc, numcodecs/zarr, imagecodecs, hdf5plugin)"
scripts/compat/compat.sh fixtures-compat

# Mount tests need FUSE, remote tests their servers: in CI their absence is
# a failure, not a skip.
if [ -n "${CI:-}" ]; then
    [ -e /dev/fuse ] || { echo "FAIL: /dev/fuse missing"; exit 1; }
    command -v fusermount3 >/dev/null || { echo "FAIL: fusermount3 missing"; exit 1; }
    # FUSE over io_uring, off by default in the kernel: the tests that
    # mount with -o uring go through its queues.
    uring=/sys/module/fuse/parameters/enable_uring
    [ -e "$uring" ] || modprobe fuse 2>/dev/null || true
    { [ -w "$uring" ] && echo 1 > "$uring"; } || { echo "FAIL: cannot set $uring (Linux 6.14 or later, as root)"; exit 1; }
    # The remote-source tests (tests/remote) start these on 127.0.0.1.
    for s in moto_server cat2-server; do
        [ -x ".venv-servers/bin/$s" ] || { echo "FAIL: .venv-servers/bin/$s missing"; exit 1; }
    done
fi

echo "== cargo test"
log=$(mktemp)
BLOSCFS_FIXTURES="$PWD/fixtures-full:$PWD/fixtures-compat" cargo test --workspace --release --lib --bins --tests -- --test-threads=2 2>&1 | tee "$log"
echo "== benches compile and run once (criterion test mode)"
cargo test -p blosc-decode --release --bench kernels 2>&1 | tee -a "$log"
echo "== the documentation examples of the library and the pool"
cargo test -p blosc-decode -p bloscfs-pool --release --doc 2>&1 | tee -a "$log"
passed=$(grep -Eo '^test result: .* ([0-9]+) passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed;' "$log" | awk '{s+=$1} END {print s+0}')
rm -f "$log"

FUZZ_SECONDS=${FUZZ_SECONDS:-20}
if [ "$FUZZ_SECONDS" -gt 0 ]; then
    echo "== fuzz (${FUZZ_SECONDS}s per target; see fuzz/README.md to run longer)"
    scripts/fuzz/run.sh "$FUZZ_SECONDS"
fi
echo "== all tests passed"
echo "tests: ${passed} passed, ${failed} failed"
