#!/bin/bash
# issue 15: the start-up probe's split error vs its size (NEZHA_PROBE_BYTES 256k default vs
# 512k), main, one 400 + 100 lab, jobs alternated ABBA; each job = one first_collective rep
source /work/main/docs/results/session22/scripts/lib.sh; lock
O=/work/main/docs/results/session22/probe-bytes; mkdir -p $O /tmp/m22
$PY -m nezha lab up --name nzfc --hosts 4 --rails 2 --rate 400mbit,100mbit --replace > /dev/null
pb() { echo "$(date -u +%H:%M:%S) $1 $2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  intree main $PY bench/first_collective.py --lab nzfc --reps 2 --modes auto \
    -x NEZHA_PROBE_BYTES=$1 --json /tmp/m22/pb-$2.json > $O/$2.txt 2>&1; }
for i in 1 2 3; do pb 256k d-$i-a; pb 512k p-$i-a; pb 512k p-$i-b; pb 256k d-$i-b; done
$PY -m nezha lab down --name nzfc > /dev/null
