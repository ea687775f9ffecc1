#!/usr/bin/env bash
# make package-check (issue 18): what a user gets from pip. Copies the tracked (and new,
# not ignored) files of this tree to a scratch folder, then
#   1. `pip install <copy>` into a fresh venv,
#   2. `pip wheel <copy>` and installs that wheel into a second fresh venv,
# and in each runs every `nezha` command from outside the tree: each must work or say plainly
# what it needs (exit status and a message, no traceback), and `nezha info` must name only
# headers that exist. Build requirements (Cython, numpy, setuptools) come from the package
# index pip is configured with. Takes 2-4 minutes here (it compiles the engine twice).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
WORK=${PACKAGE_CHECK_DIR:-$(mktemp -d /tmp/nezha-pkgcheck.XXXXXX)}
PY=${PYTHON:-python3}
mkdir -p "$WORK/src"
(cd "$HERE" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$WORK/src")
fail=0

check() {  # check VENV LABEL
    local V=$1/bin label=$2
    cd "$WORK"   # not the source tree: the installed package alone
    echo "== $label: $($V/nezha --version)"
    run() {  # run EXPECT CMD...: EXPECT = ok (exit 0) or says (non-zero with a message, no traceback)
        local expect=$1; shift
        local out rc
        out=$(timeout 120 "$@" 2>&1) && rc=0 || rc=$?
        if grep -q "Traceback" <<<"$out"; then
            echo "FAIL (traceback) $*"; echo "$out" | tail -5; fail=1
        elif [[ $expect == ok && $rc != 0 ]]; then
            echo "FAIL (exit $rc) $*"; echo "$out" | tail -5; fail=1
        elif [[ $expect == says && $rc == 0 ]]; then
            echo "FAIL (expected a refusal) $*"; fail=1
        else
            echo "ok   (exit $rc) $* :: $(tail -1 <<<"$out" | cut -c1-150)"
        fi
    }
    run ok $V/nezha --help
    run ok $V/nezha info
    run ok $V/nezha info --json
    inc=$($V/python -c "import nezha; print(nezha.get_include())")
    if [[ -f $inc/nezha/nezha_types.h && $($V/nezha info) == *"headers   $inc"* ]]; then
        echo "ok   headers shipped: $inc ($(ls "$inc/nezha" | wc -l) files)"
    else
        echo "FAIL headers: get_include() = $inc"; fail=1
    fi
    run ok $V/nezha topo
    run ok $V/nezha lab --help
    run ok $V/nezha lab list
    run ok $V/nezha sim --help
    run ok $V/nezha ina --help
    run ok $V/nezha bench --help
    run ok $V/nezha demo --help
    run says $V/nezha bench compare --quick      # needs bench/ of a source tree
    run says $V/nezha demo                       # needs bench/ of a source tree (and mpirun)
    if [[ -x $V/mpirun ]] || command -v mpirun >/dev/null; then
        run ok $V/nezha mpirun -np 2 -- $V/python -c "import nezha"
    else
        run says $V/nezha mpirun -np 2 -- true   # says how to get Open MPI
    fi
    # a one-rank job on the compiled engine: the collectives work from the installed package
    run ok env NEZHA_SOCKET_IFNAME=lo $V/python -c "
import numpy as np, nezha
c = nezha.Communicator(); a = np.arange(10, dtype=np.float32); c.allreduce(a)
assert (a == np.arange(10)).all(); c.close(); print('one-rank allreduce ok')"
    if [[ $(id -u) == 0 ]]; then   # the lab: root, namespaces
        local name=pk$$
        run ok $V/nezha lab up --name $name --hosts 2 --rails 2
        run ok $V/nezha lab run --name $name --env-rendezvous -- $V/python -c "
import numpy as np, nezha
c = nezha.Communicator(); a = np.ones(1000, np.int64); c.allreduce(a)
assert (a == c.size).all(); print('lab allreduce ok', c.size)"
        if ! [[ -x $V/mpirun ]] && ! command -v mpirun >/dev/null; then
            run says $V/nezha lab run --name $name -- true   # without Open MPI: says so
        fi
        run ok $V/nezha lab down --name $name
    fi
}

echo "# 1. pip install (fresh venv $WORK/venv-install)"
$PY -m venv "$WORK/venv-install"
"$WORK/venv-install/bin/pip" install -q "$WORK/src"
check "$WORK/venv-install" "pip install ."

echo "# 2. pip wheel, then install the wheel (fresh venv $WORK/venv-wheel)"
"$WORK/venv-install/bin/pip" wheel -q --no-deps "$WORK/src" -w "$WORK/wheels"
$PY -m zipfile -l "$WORK"/wheels/nezha-*.whl | grep -c "nezha/include/nezha/.*\.h" | xargs echo "headers in the wheel:"
$PY -m venv "$WORK/venv-wheel"
"$WORK/venv-wheel/bin/pip" install -q "$WORK"/wheels/nezha-*.whl
check "$WORK/venv-wheel" "wheel"

[[ -n ${PACKAGE_CHECK_DIR:-} ]] || rm -rf "$WORK"
[[ $fail == 0 ]] && echo "package-check: every command works or says what it needs" \
    || { echo "package-check: FAILED"; exit 1; }
