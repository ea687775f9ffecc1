#!/bin/bash
# main vs h34 in the breakdown harness (30 barrier-separated + 30 back-to-back 16 MiB calls
# after 3 warm-ups), A B B A per layout, one lock hold per layout
D=$(dirname $(readlink -f $0)); O=${1:-/tmp/h34-bd/tree}
for hl in "2 4" "4 2"; do
  set -- $hl
  (
  flock -x 9
  n=0
  for t in main h34 h34 main; do
    n=$((n+1))
    echo "$(date -u +%H:%M:%S) ${1}x$2 $n $t load $(cut -d' ' -f1-3 /proc/loadavg)" >> $D/abtree-times.txt
    $D/bd.sh /work/$t $O/${1}x$2-$n-$t $1 $2 -x BD_REPS=30
  done
  ) 9>/tmp/nezha-quiet.lock
done
