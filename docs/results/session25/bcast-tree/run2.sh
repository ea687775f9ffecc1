#!/bin/bash
# Under one exclusive timing lock: (1) equal rails, 8-32 KiB: B (the model's choice: the
# chain from ~12 KiB) against T = B with NEZHA_SMALL_MSG_THRESHOLD=32k (the lazy tree below
# 32 KiB), B T T B; (2) 400 + 100 Mbit/s, A B B A at 4 B-32 KiB (as run.sh); (3) the failover
# bench's 1 KiB row, A then B (its own lab). usage: run2.sh OUTDIR
PY=/work/main/.venv/bin/python; A=/work/h23-base; B=/work/h23
OUT=$1; mkdir -p $OUT/tree-vs-chain $OUT/unequal $OUT/failover
export NEZHA_LAB_NAME=h23
cmp() {  # tree outdir rates extra...
  local T=$1 O=$2 R=$3; shift 3
  (cd $T && PYTHONPATH=$T timeout 600 $PY -m nezha bench compare --lab h23 --rates $R \
    --collectives broadcast --systems nezha-all,mpi-all --reps 1 --reps-other 1 --no-lab-check \
    --out $O "$@" > $O.log 2>&1); echo "$(date -u +%H:%M:%S) $O rc $?" >> $OUT/times.txt
}
export -f cmp; export PY A B OUT
flock -x /tmp/nezha-quiet.lock bash -c '
  echo "$(date -u +%H:%M:%S) start load $(cut -d" " -f1-3 /proc/loadavg)" >> $OUT/times.txt
  cd $A && PYTHONPATH=$A $PY -m nezha lab up --hosts 4 --rails 2 --rate 400mbit --replace > $OUT/lab1.log 2>&1
  i=0; for v in B T T B; do i=$((i+1))
    if [ $v = T ]; then NEZHA_SMALL_MSG_THRESHOLD=32768 cmp $B $OUT/tree-vs-chain/$i$v 400mbit --min-size 8K --max-size 32K
    else cmp $B $OUT/tree-vs-chain/$i$v 400mbit --min-size 8K --max-size 32K; fi
  done
  cd $A && PYTHONPATH=$A $PY -m nezha lab down > /dev/null 2>&1
  cd $A && PYTHONPATH=$A $PY -m nezha lab up --hosts 4 --rails 2 --rate 400mbit,100mbit --replace > $OUT/lab2.log 2>&1
  i=0; for v in A B B A; do i=$((i+1)); [ $v = A ] && T=$A || T=$B
    cmp $T $OUT/unequal/$i$v 400mbit,100mbit --max-size 32K; done
  cd $A && PYTHONPATH=$A $PY -m nezha lab down > /dev/null 2>&1
  for v in A B; do [ $v = A ] && T=$A || T=$B
    (cd $T && PYTHONPATH=$T timeout 400 $PY bench/failover.py --sizes 1K --failures 4 > $OUT/failover/$v.log 2>&1)
    echo "$(date -u +%H:%M:%S) failover $v rc $?" >> $OUT/times.txt; done
  echo "$(date -u +%H:%M:%S) end" >> $OUT/times.txt'
