#!/bin/bash
# As ab.sh, at 2 hosts x 4 ranks (HOSTS=2 RPH=4 micro/run_micro.sh): the x3 step latency moves
# the rd->hier switch (allreduce 1.5 -> 4.6 KiB, allgather / reduce_scatter 4.0 -> 11.9 KiB in all).
PY=/work/main/.venv/bin/python; A=/work/h21; B=/work/h21-exp
for spec in allreduce:512:16K allgather:128:4K; do
  IFS=: read coll lo hi <<< "$spec"
  for v in A B B A; do
    [ $v = A ] && T=$A || T=$B
    echo "== $coll $v"
    PYTHONPATH=$T $PY -m nezha lab run --timeout 240 -- $PY $T/bench/osu_$coll.py --backend nezha \
      -m $lo:$hi --time-budget 0.3 | grep -v "^#" | awk 'NF>1{print $1, $2}'
  done
done
