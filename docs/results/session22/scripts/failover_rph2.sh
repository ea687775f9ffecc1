#!/bin/bash
# issue 12's failover bar with 2 ranks per host after rd_hosts (a small allreduce crosses
# hosts from one rank per host): 1 KiB and 1 MiB, main vs a2b773c (/work/b22), ABBA
source /work/main/docs/results/session22/scripts/lib.sh; lock
O=/work/main/docs/results/session22/failover-rph2; mkdir -p $O /tmp/m22
n=0
for t in main b22 b22 main; do
  n=$((n+1))
  echo "$(date -u +%H:%M:%S) $t run $n load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  intree $t $PY bench/failover.py --sizes 1K,1M --failures 4 --ranks-per-host 2 \
     --json /tmp/m22/fo-rph2-$t-$n.json > $O/failover-$t-$n.log 2>&1
done
