#!/bin/bash
# usage: algo.sh RATE OUTDIR  (under flock -x): lab up, nezha info in it, ring/rab/auto(+INFO log), lab down
set -u
cd /work/h26
export PYTHONPATH=/work/h26 NEZHA_LAB_NAME=h26
PY=/work/main/.venv/bin/python
date -u
$PY -m nezha lab up --name h26 --hosts 4 --rails 2 --rate $1 --replace >/dev/null
$PY -m nezha lab exec --name h26 --timeout 60 0 env PYTHONPATH=/work/h26 NEZHA_SOCKET_IFNAME=rail0,rail1 WORLD_SIZE=4 $PY -m nezha info 2>&1 | sed -n '/algorithm choice/,$p' > $2.info.txt
rm -rf /tmp/h26/plan; mkdir -p /tmp/h26/plan
timeout 600 $PY docs/results/session25/fast-rails/variants.py --variant ring:NEZHA_ALGO=ring \
  --variant rab:NEZHA_ALGO=rab --variant info:NEZHA_DEBUG=INFO,NEZHA_DEBUG_FILE=/tmp/h26/plan/%h.%p.log -- \
  --lab h26 --collectives allreduce --systems nezha-all,nezha-ring,nezha-rab,nezha-info \
  --min-size 256K --max-size 4M --reps 2 --time-budget 0.3 --out $2
rc=$?
$PY -m nezha lab down --name h26
date -u
exit $rc
