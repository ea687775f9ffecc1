#!/bin/bash
# issue 12: small-message latency, before (479d859) vs last landed (cec8c0a), interleaved ABBA
set -u
OUT=/work/main/docs/results/session18/small
mkdir -p $OUT
NZ=/work/main/.venv/bin/nezha
PY=/work/main/.venv/bin/python
exec 9>/tmp/nezha-quiet.lock
flock -x 9
date -u > $OUT/times.txt
$PY -m nezha lab up --name sm18 --hosts 4 --rails 2 > $OUT/lab.log 2>&1
run() { # tree label
  (cd /work/$1 && PYTHONPATH=/work/$1 $PY -m nezha lab run --name sm18 --mca btl_tcp_if_include rail0 -- \
     $PY /work/$1/bench/small_messages.py --sizes 4,64,256,1024 --reps 7 --calls 1000) > $OUT/$2.txt 2>&1
}
for r in 1 2 3 4; do
  if [ $((r % 2)) = 1 ]; then run t479 before-$r; run tcec after-$r; else run tcec after-$r; run t479 before-$r; fi
done
$PY -m nezha lab down --name sm18 >> $OUT/lab.log 2>&1
date -u >> $OUT/times.txt
echo DONE >> $OUT/times.txt
