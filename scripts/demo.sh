#!/usr/bin/env bash
# Set up, build, install and run bloscfs on a fresh Debian machine:
# installs FUSE 3 and the reference Python libraries (scripts/setup.sh),
# builds the release binary, installs it to /usr/local/bin (plus the man
# page), writes a sample directory of containers with python-blosc2 and
# bloscpack, mounts it, shows it, and leaves it mounted.
#   scripts/demo.sh [SAMPLE_DIR [MOUNTPOINT]]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
scripts/setup.sh
cargo build --release
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO install -m 755 target/release/bloscfs /usr/local/bin/bloscfs
$SUDO install -d /usr/local/share/man/man1
$SUDO install -m 644 man/bloscfs.1 /usr/local/share/man/man1/bloscfs.1

src=${1:-/tmp/bloscfs-sample}
mnt=${2:-/tmp/bloscfs-mnt}
mkdir -p "$src" "$mnt"
.venv/bin/python - "$src" <<'PY'
import sys, numpy as np, blosc2
src = sys.argv[1]
t = np.linspace(0, 100, 4_000_000) + np.sin(np.arange(4_000_000) / 500.0)
blosc2.asarray(t.reshape(2000, 2000), urlpath=f"{src}/temperature.b2nd", mode="w")
s = blosc2.SChunk(chunksize=8 << 20, urlpath=f"{src}/series.b2frame", mode="w",
                  cparams=dict(typesize=8, codec=blosc2.Codec.ZSTD, clevel=1))
raw = t.tobytes()
for i in range(0, len(raw), 8 << 20):
    s.append_data(raw[i:i + (8 << 20)])
open(f"{src}/README.txt", "w").write("other files pass through unchanged\n")
PY
if grep -qs " $mnt " /proc/mounts; then fusermount3 -u "$mnt"; fi
bloscfs -o xattr "$src" "$mnt"
echo "== mounted $src on $mnt"
ls -l "$src" "$mnt"
.venv/bin/python -c "import numpy as np; a = np.load('$mnt/temperature.npy', mmap_mode='r'); print('temperature.npy', a.shape, a.dtype, a[1000, :3])"
getfattr -d "$mnt/series" 2>/dev/null | head -8 || true
echo "== unmount with: fusermount3 -u $mnt"
