#!/bin/bash
# Experiment (not merged): the cost model's step latency x3 (RAIL_ALPHA 25 -> 75 us, SHM_ALPHA
# 5 -> 15 us) in a copy of the tree, A = this tree, B = the copy, A B B A per collective in one
# lab (run inside micro/run_micro.sh). Each job's rank 0 prints OSU size and latency (us).
# B: the tree copied (tar, without .git and docs) to /work/h21-exp, costmodel-x3.diff applied.
PY=/work/main/.venv/bin/python; A=/work/h21; B=/work/h21-exp
for spec in allreduce:2K:64K bcast:4K:32K allgather:1K:16K reduce_scatter:4K:64K; do
  IFS=: read coll lo hi <<< "$spec"
  for v in A B B A; do
    [ $v = A ] && T=$A || T=$B
    echo "== $coll $v"
    PYTHONPATH=$T $PY -m nezha lab run --timeout 240 -- $PY $T/bench/osu_$coll.py --backend nezha \
      -m $lo:$hi --time-budget 0.3 | grep -v "^#" | awk 'NF>1{print $1, $2}'
  done
done
