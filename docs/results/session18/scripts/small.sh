#!/bin/bash
# issue 12: small-message latency, before the host area (479d859) vs after (main), interleaved ABBA
source /tmp/m18/lib.sh; lock; O=$R/small-final; mkdir -p $O
stamp "small start"
$PY -m nezha lab up --name sm18 --hosts 4 --rails 2 > $O/lab.log 2>&1
run() { intree $1 $PY -m nezha lab run --name sm18 --mca btl_tcp_if_include rail0 -- \
     $PY bench/small_messages.py --sizes 4,64,256,1024 --reps 5 --calls 1000 > $O/$2.txt 2>&1; }
for r in 1 2 3 4 5 6 7 8; do
  if [ $((r % 2)) = 1 ]; then run t479 before-$r; run main after-$r; else run main after-$r; run t479 before-$r; fi
done
$PY -m nezha lab down --name sm18 >> $O/lab.log 2>&1
stamp "small done"
