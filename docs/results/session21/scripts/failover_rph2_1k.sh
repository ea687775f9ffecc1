#!/bin/bash
# 1 KiB failover with 2 ranks per host, more cuts (after vs before was 7-12 ms apart in 4 cuts):
# main, t31, t31, main; 6 cuts per mode per run, 12 per tree
source /work/main/docs/results/session21/scripts/lib.sh; lock
O=/work/main/docs/results/session21/failover-rph2; mkdir -p $O
n=0
for t in main t31 t31 main; do
  n=$((n+1))
  echo "$(date -u +%H:%M:%S) 1k $t run $n load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  intree $t $PY bench/failover.py --sizes 1K --failures 6 --ranks-per-host 2 \
     --json /tmp/m21/fo-1k-$t-$n.json > $O/failover-1k-$t-$n.log 2>&1
done
