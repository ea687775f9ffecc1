#!/bin/bash
# usage: loop.sh OUT N [extra pytest args]
out=$1; n=$2; shift 2
cd ${TREE:-/work/hE}
for i in $(seq 1 $n); do
  flock -s /tmp/nezha-quiet.lock env PYTHONPATH=${TREE:-/work/hE} /work/main/.venv/bin/python -m pytest -q tests/test_loop_faults.py -k "repeated_faults and (reset or close)" --basetemp=$out/run$i -p no:cacheprovider "$@" 2>&1 | tail -1
done
