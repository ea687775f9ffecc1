#!/bin/bash
# 2 x 4 only, 60 + 60 calls per run (model syncs counted), main h34 h34 main, one lock hold
D=$(dirname $(readlink -f $0)); O=${1:-/tmp/h34-bd/tree2}
exec 9>/tmp/nezha-quiet.lock; flock -x 9
n=0
for t in main h34 h34 main; do
  n=$((n+1))
  echo "$(date -u +%H:%M:%S) 2x4 $n $t load $(cut -d' ' -f1-3 /proc/loadavg)" >> $D/abtree2-times.txt
  $D/bd.sh /work/$t $O/2x4-$n-$t 2 4 -x BD_REPS=60
done
