#!/bin/bash
# A = main's tree (0be26ce, the model's constant step latency), B = h22 (measured at start-up),
# A B B A per collective in one lab (2 hosts x 4 ranks, 2 rails of 400 Mbit/s; run.sh). Each
# job's rank 0 prints OSU size and latency (us); step_report.py: B's measured step per job.
PY=/work/main/.venv/bin/python; A=/work/main; B=/work/h22; D=$(dirname $(readlink -f $0))
for v in A B; do
  [ $v = A ] && T=$A || T=$B
  echo "== step_report $v"
  PYTHONPATH=$T $PY -m nezha lab run --timeout 240 -- $PY $D/step_report.py | grep -E "^(STEP|ALPHA|FAST|TABLE)"
done
for spec in ${SPECS:-allreduce:4:16K allgather:128:4K reduce_scatter:1K:16K}; do
  IFS=: read coll lo hi <<< "$spec"
  for v in A B B A; do
    [ $v = A ] && T=$A || T=$B
    echo "== $coll $v"
    PYTHONPATH=$T $PY -m nezha lab run --timeout 240 -- $PY $T/bench/osu_$coll.py --backend nezha \
      -m $lo:$hi --time-budget 0.3 | grep -v "^#" | awk 'NF>1{print $1, $2}'
  done
done
