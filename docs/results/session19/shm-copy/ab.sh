#!/bin/bash
# one host, 4 and 2 ranks, host area: base (541c6ec) vs hA (nz_copy), Open MPI sm in every run,
# order A B B A per rank count; run under flock -x /tmp/nezha-quiet.lock
O=${O:-/work/hA/docs/results/session19/shm-copy}; PY=/work/main/.venv/bin/python
run() { # tree np tag
  cd $1 && PYTHONPATH=$1 $PY bench/compare_loopback.py --backends nezha-shm,mpi-sm --reps 1 -np $2 \
    -m 1M:16M --time-budget 0.3 --out /tmp/hA-lb > $O/np$2-$3-$(date +%H%M%S).txt 2>&1; }
for np in 4 2; do
  for t in base hA hA base; do
    [ $t = base ] && run /work/hA-base $np base || run /work/hA $np hA
  done
done
