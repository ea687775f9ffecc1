#!/bin/bash
# Interleaved runs, this tree (new, MIN_RAIL_PIECE auto) vs 62b069d (base, 64k), nezha-all.
# usage: run.sh KIND TAG tree [tree ...]; KIND: cmp4 (400+400), cmp41 (400+100), big (16 MiB
# allreduce, 400+400), cmp8 (8 hosts x 1, 400+400), rph (4 hosts x 2 ranks, 400+400, allreduce). Run under flock -x;
# each run builds and tears down its own lab (NEZHA_LAB_NAME=nzhf).
PY=/work/main/.venv/bin/python; O=/tmp/hF/out; mkdir -p $O; KIND=$1; TAG=$2; shift 2
export NEZHA_LAB_NAME=nzhf; unset NEZHA_MIN_RAIL_PIECE
i=0
for t in "$@"; do
  i=$((i + 1))
  d=/work/hF; [ $t = base ] && d=/work/hF-base
  n=$KIND-$TAG$i-$t
  case $KIND in
    cmp4|cmp41) R=400mbit,400mbit; [ $KIND = cmp41 ] && R=400mbit,100mbit
      (cd $d && PYTHONPATH=$d timeout 600 $PY -m nezha bench compare --quick --no-lab-check \
        --systems nezha-all --collectives allreduce,broadcast --min-size 16K --max-size 1M \
        --rates $R --out $O/$n > $O/$n.log 2>&1) ;;
    cmp8) (cd $d && PYTHONPATH=$d timeout 600 $PY -m nezha bench compare --quick --no-lab-check \
        --hosts 8 --systems nezha-all --collectives allreduce,broadcast --min-size 32K \
        --max-size 256K --rates 400mbit,400mbit --out $O/$n > $O/$n.log 2>&1) ;;
    big) (cd $d && PYTHONPATH=$d timeout 600 $PY -m nezha bench compare --quick \
        --systems nezha-all --collectives allreduce --min-size 16M --max-size 16M --time-budget ${TB:-0.05} \
        --rates 400mbit,400mbit --out $O/$n > $O/$n.log 2>&1) ;;
    rph) (cd $d && PYTHONPATH=$d timeout 600 $PY bench/ranks_per_host.py --hosts 4 \
        --ranks-per-host 2 --rails 2 --systems nezha-all --sizes 32K,64K,128K,256K,1M \
        --reps ${REPS:-3} --json $O/$n.json --out $O/$n.md > $O/$n.log 2>&1) ;;
  esac
  echo "== $n rc $? $(date -u +%T)"
done
$PY -m nezha lab down >/dev/null 2>&1 || true
