#!/bin/bash
# failover bench with 2 ranks per host (issue 12's bar), before (t31 = 62b069d) and after (main):
# re-admission now counts from the failure (helper-12) and wants every peer heard within 3
# heartbeats at the vote; check it still re-admits, and the extra, under 8 ranks on 2 CPUs
source /work/main/docs/results/session21/scripts/lib.sh; lock
O=/work/main/docs/results/session21/failover-rph2; mkdir -p $O
for t in main t31; do
  echo "$(date -u +%H:%M:%S) $t load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  intree $t $PY bench/failover.py --sizes 1K,1M --failures 4 --ranks-per-host 2 \
     --json /tmp/m21/fo-rph2-$t.json > $O/failover-$t.log 2>&1
done
