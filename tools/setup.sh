#!/usr/bin/env bash
# Idempotent setup: Debian packages the lab needs, then a venv with pinned PyPI packages.
# Fast when already done (stamp files), so `make test` and `make demo` can always call it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

need_deb=()
command -v nft >/dev/null 2>&1 || need_deb+=(nftables)
command -v lstopo-no-graphics >/dev/null 2>&1 || need_deb+=(hwloc-nox)
command -v ip >/dev/null 2>&1 || need_deb+=(iproute2)
command -v tc >/dev/null 2>&1 || need_deb+=(iproute2)
command -v ethtool >/dev/null 2>&1 || need_deb+=(ethtool)
# hwloc's headers for nezha._core.hwloc (`nezha topo`); without them the build skips it
[ -f /usr/include/hwloc.h ] || need_deb+=(libhwloc-dev)
if [ ${#need_deb[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing Debian packages: ${need_deb[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null
        apt-get install -y -qq --no-install-recommends "${need_deb[@]}" >/dev/null
    else
        echo "setup: warning: missing ${need_deb[*]} (needs root + apt-get); lab features will skip" >&2
    fi
fi

stamp="$VENV/.nezha-requirements"
if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
if [ ! -f "$stamp" ] || ! cmp -s requirements.txt "$stamp"; then
    echo "setup: installing Python packages (requirements.txt)"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements.txt 2>&1 \
        | grep -v "is ignored: it is neither a file nor a directory" || true
    "$VENV/bin/python" -c "import numpy, Cython, mpi4py, pytest, hypothesis" 
    cp requirements.txt "$stamp"
fi
