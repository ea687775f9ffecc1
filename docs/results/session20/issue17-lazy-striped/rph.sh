#!/bin/bash
# 4 hosts x 2 ranks, nezha-all, this tree (new) vs 48c9408 (base), NEZHA_MIN_RAIL_PIECE 32k/64k.
# usage: rph.sh TAG tree piece [tree piece ...]   (each run builds and tears down its own lab)
PY=/work/main/.venv/bin/python; O=/tmp/hA/out; mkdir -p $O; TAG=$1; shift
while [ $# -ge 2 ]; do
  t=$1; p=$2; shift 2
  d=/work/hA; [ $t = base ] && d=/work/hA-base
  n=rph-$TAG-$t-$p
  (cd $d && env NEZHA_MIN_RAIL_PIECE=$p PYTHONPATH=$d timeout 600 $PY bench/ranks_per_host.py --hosts 4 \
     --ranks-per-host 2 --rails 2 --systems nezha-all --sizes ${SIZES:-16K,32K,64K,128K,256K} \
     --reps ${REPS:-3} --json $O/$n.json --out $O/$n.md > $O/$n.log 2>&1)
  echo "== $n rc $? $(date -u +%T)"; grep -A8 '^| Size' $O/$n.md
done
