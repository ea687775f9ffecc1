#!/bin/bash
# usage: compare.sh RATE OUTDIR  (run under flock -x /tmp/nezha-quiet.lock)
set -u
cd /work/h26
export PYTHONPATH=/work/h26 NEZHA_LAB_NAME=h26
date -u
timeout 900 /work/main/.venv/bin/python -m nezha bench compare --rates $1 --collectives allreduce \
  --systems nezha-all,mpi-all-ring,mpi-all --min-size 1M --max-size 64M --reps 2 --time-budget 0.3 \
  --out $2
rc=$?
date -u
exit $rc
