#!/bin/bash
# usage: algo2.sh RATE OUTDIR (under flock -x): ring vs rab vs auto near the model's rab->ring switch
set -u
cd /work/h26
export PYTHONPATH=/work/h26
date -u
timeout 600 /work/main/.venv/bin/python docs/results/session25/fast-rails/variants.py --variant ring:NEZHA_ALGO=ring \
  --variant rab:NEZHA_ALGO=rab -- --rates $1 --collectives allreduce --systems nezha-all,nezha-ring,nezha-rab \
  --min-size 32K --max-size 512K --reps 3 --time-budget 0.3 --no-lab-check --out $2
rc=$?; date -u; exit $rc
