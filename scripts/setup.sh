#!/usr/bin/env bash
# Installs what bloscfs needs on a fresh Debian machine (idempotent):
# FUSE 3 and attr tools from Debian, and a Python venv with the reference
# Blosc libraries (test oracles and benchmark contenders) from PyPI, and
# .venv-servers with the test servers (scripts/servers/requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v fusermount3 >/dev/null 2>&1 || need_apt+=(fuse3)
command -v getfattr >/dev/null 2>&1 || need_apt+=(attr)
# The HTTPS tests make their certificates with openssl.
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    else
        sudo apt-get update -qq
        sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    fi
fi

# (A venv cut short while it was made has no pip: made again.)
if [ ! -x .venv/bin/python ] || [ ! -x .venv/bin/pip ]; then
    python3 -m venv --clear .venv
fi
if ! .venv/bin/python -c 'import blosc2, blosc, bloscpack, numpy' >/dev/null 2>&1 \
   || ! cmp -s scripts/requirements.txt .venv/.installed-requirements; then
    .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements.txt
    cp scripts/requirements.txt .venv/.installed-requirements
fi

# The servers the remote-source tests start on 127.0.0.1 (moto for the S3
# API, caterva2): their own venv, as caterva2 pins its own python-blosc2.
if [ ! -x .venv-servers/bin/python ] || [ ! -x .venv-servers/bin/pip ]; then
    python3 -m venv --clear .venv-servers
fi
if [ ! -x .venv-servers/bin/moto_server ] || [ ! -x .venv-servers/bin/cat2-server ] \
   || ! cmp -s scripts/servers/requirements.txt .venv-servers/.installed-requirements; then
    .venv-servers/bin/pip install -q --disable-pip-version-check -r scripts/servers/requirements.txt
    cp scripts/servers/requirements.txt .venv-servers/.installed-requirements
fi
