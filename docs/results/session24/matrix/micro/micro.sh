#!/bin/bash
# Run inside run_micro.sh (lab up): the small broadcast against an allreduce of the same size
# (both recursive doubling with failover), and allgather / reduce_scatter with the model's
# rd->ring switch (default) against recursive doubling forced below 64 KiB in all
# (NEZHA_SMALL_MSG_THRESHOLD=64k, the fixed rule), A B B A in one lab.
PY=/work/main/.venv/bin/python; M=$(dirname $(readlink -f $0)); B=$M/../../../../../bench
RUN="$PY -m nezha lab run --timeout 240"
echo "== broadcast vs allreduce, 2 rails, failover on (default)"
$RUN -- $PY $M/bcast_vs_allreduce.py 4,64,1024,4096
for coll in allgather reduce_scatter; do
  [ $coll = allgather ] && m=1024:16384 || m=4096:65536
  for v in default rd rd default; do
    x=""; [ $v = rd ] && x="-x NEZHA_SMALL_MSG_THRESHOLD=64k"
    echo "== $coll $v"
    $RUN $x -- $PY $B/osu_$coll.py --backend nezha -m $m --time-budget 0.4 -f | grep -v "^#" | awk 'NF>1{print $1, $2, $NF}'
  done
done
