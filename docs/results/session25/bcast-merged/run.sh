#!/bin/bash
# A = baa3528 (worktree /work/base25), B = main with every session-25 merge (the lazy tree and h24's links' rate with a measured step, which moves the tree/chain switch).
# One lab (4 hosts x 1 rank, 2 rails at RATES), compare A B B A in it (nezha-all and mpi-all
# in each run: the ratio is within one run), lab down; all under the exclusive timing lock.
# usage: RATES=400mbit run.sh OUTDIR
PY=/work/main/.venv/bin/python; A=/work/base25; B=/work/main
OUT=$1; RATES=${RATES:-400mbit}; mkdir -p $OUT
export NEZHA_LAB_NAME=m25b
flock -x /tmp/nezha-quiet.lock bash -c "
  echo \"\$(date -u +%H:%M:%S) start load \$(cut -d' ' -f1-3 /proc/loadavg) rates $RATES\" >> $OUT/times.txt
  cd $A && PYTHONPATH=$A $PY -m nezha lab up --hosts 4 --rails 2 --rate $RATES --replace > $OUT/lab.log 2>&1 || echo lab up failed >> $OUT/times.txt
  i=0
  for v in A B B A; do
    i=\$((i+1)); [ \$v = A ] && T=$A || T=$B
    cd \$T && PYTHONPATH=\$T timeout 600 $PY -m nezha bench compare --lab m25b --rates $RATES --collectives broadcast \
      --systems nezha-all,mpi-all --min-size 1K --max-size 32K --reps 1 --reps-other 1 --no-lab-check --out $OUT/\$i\$v > $OUT/\$i\$v.log 2>&1
    echo \"\$(date -u +%H:%M:%S) \$i\$v rc \$?\" >> $OUT/times.txt
  done
  cd $A && PYTHONPATH=$A $PY -m nezha lab down > /dev/null 2>&1
  echo \"\$(date -u +%H:%M:%S) end\" >> $OUT/times.txt"
