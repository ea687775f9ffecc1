#!/bin/bash
# session 25: iar_small.py (2 ranks, this host) at NEZHA_PROGRESS_SCHED=other and auto (the new
# default), O A A O O A A O in one go under flock -x /tmp/nezha-quiet.lock
S=$(dirname $(readlink -f $0)); T=$(dirname $(dirname $(dirname $(dirname $(dirname $S)))))
for m in other auto auto other other auto auto other; do
  echo -n "$(date -u +%H:%M:%S) $m: "
  (cd $T && PYTHONPATH=$T NEZHA_PROGRESS_SCHED=$m OMP_NUM_THREADS=1 timeout 120 \
    /work/main/.venv/bin/python -m nezha mpirun -np 2 --timeout 100 -- \
    /work/main/.venv/bin/python $S/iar_small.py 2>&1 | grep -v "^$" | tail -1)
done
