#!/bin/bash
# issue 13: small allreduce on INA against nezha's TCP on the same rail, 4 hosts x 1 rank,
# interleaved in one process per rank (bench/ina_small_latency.py); three labs in a row.
# Run under flock -x /tmp/nezha-quiet.lock.
PY=/work/main/.venv/bin/python; D=$(dirname $(readlink -f $0)); cd /work/main
for i in 1 2 3; do
  $PY -m nezha lab up --name i23 --hosts 4 --rails 2 --rate 400mbit --ina 1 >> $D/lab.log 2>&1 || exit 1
  echo "$(date -u +%H:%M:%S) run $i" >> $D/times.txt
  $PY -m nezha lab run --name i23 --timeout 300 -- $PY bench/ina_small_latency.py \
    --sizes 4,64,1024 --reps 5 > $D/run-$i.txt 2>&1
  $PY -m nezha lab down --name i23 >> $D/lab.log 2>&1
done
echo "$(date -u +%H:%M:%S) end" >> $D/times.txt
