#!/bin/bash
# usage: spin.sh RATE OUTDIR REPS MIN  (under flock -x): NEZHA_SPIN_US=0 against the default, one lab
set -u
cd /work/h26
export PYTHONPATH=/work/h26
date -u
timeout 900 /work/main/.venv/bin/python docs/results/session25/fast-rails/variants.py \
  --variant spin0:NEZHA_SPIN_US=0 -- \
  --rates $1 --collectives allreduce --systems nezha-all,nezha-spin0 \
  --min-size $4 --max-size 64M --reps $3 --time-budget 0.3 --out $2
rc=$?
date -u
exit $rc
