#!/bin/bash
# ceilings, then base/hA/Open MPI sm ABBA at 4 and 2 ranks, then ceilings again (one run)
# run under flock -x /tmp/nezha-quiet.lock
D=$(dirname $0); S=$D/osu.sh; PY=/work/main/.venv/bin/python
lim() { PYTHONPATH=/work/hA $PY /work/hA/bench/memcpy_limit.py --sizes 1M,16M --procs 2,4 --mode memcpy,cma --budget 0.5 --ranks $1; }
date -u +%H:%M; lim 4
for np in 4 2; do
  echo "## $np ranks, 1M:16M, budget 1 s"
  for t in base hA mpi hA base mpi; do
    echo -n "$t "; case $t in base) $S /work/hA-base $np 1M:16M 1;; hA) $S /work/hA $np 1M:16M 1;; mpi) $S /work/hA $np 1M:16M 1 mpi;; esac
  done
done
lim 2; date -u +%H:%M
