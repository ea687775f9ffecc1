#!/bin/bash
# failure detection before/after the fix: bench/failover.py 1 KiB, 4 cuts per mode, old
# (/work/h20-base: dcbdeca + run_polls) vs new (/work/h20), ABBA, under the timing lock
PY=/work/main/.venv/bin/python
O=$(dirname $(dirname $(readlink -f $0)))/failover; mkdir -p $O /tmp/h20/fo
exec 9>/tmp/nezha-quiet.lock; flock -x 9
n=0
for t in h20-base h20 h20 h20-base; do
  n=$((n+1))
  echo "$(date -u +%H:%M:%S) $t run $n load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  (cd /work/$t && PYTHONPATH=/work/$t $PY bench/failover.py --sizes 1K --failures 4 \
     --json /tmp/h20/fo/$t-$n.json > $O/failover-$t-$n.log 2>&1)
done
