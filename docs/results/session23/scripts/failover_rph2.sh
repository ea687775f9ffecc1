#!/bin/bash
# issue 12's failover bar with 2 ranks per host after the host-aware barrier and the local
# wait spin: 1 KiB and 1 MiB, main vs ce2d3e6 (/work/base23), ABBA, under the timing lock
PY=/work/main/.venv/bin/python
exec 9>/tmp/nezha-quiet.lock; flock -x 9
O=$(dirname $(dirname $(readlink -f $0)))/failover-rph2; mkdir -p $O /tmp/m23
n=0
for t in main base23 base23 main; do
  n=$((n+1))
  echo "$(date -u +%H:%M:%S) $t run $n load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  (cd /work/$t && PYTHONPATH=/work/$t $PY bench/failover.py --sizes 1K,1M --failures 4 \
     --ranks-per-host 2 --json /tmp/m23/fo-rph2-$t-$n.json > $O/failover-$t-$n.log 2>&1)
done
