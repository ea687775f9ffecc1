#!/bin/bash
# 1 rank per host (compare --quick, nezha-all), this tree (new) vs 48c9408 (base), 32k/64k.
# usage: cmp.sh TAG RATES tree piece [tree piece ...]   (each run builds and tears down its lab)
PY=/work/main/.venv/bin/python; O=/tmp/hA/out; mkdir -p $O; TAG=$1; RATES=$2; shift 2
while [ $# -ge 2 ]; do
  t=$1; p=$2; shift 2
  d=/work/hA; [ $t = base ] && d=/work/hA-base
  n=cmp-$TAG-$t-$p
  (cd $d && env NEZHA_MIN_RAIL_PIECE=$p PYTHONPATH=$d timeout 900 $PY -m nezha bench compare --quick \
     --systems nezha-all --collectives allreduce,broadcast --min-size 16K --max-size 1M \
     --rates $RATES --out $O/$n > $O/$n.log 2>&1)
  echo "== $n rc $? $(date -u +%T)"
done
