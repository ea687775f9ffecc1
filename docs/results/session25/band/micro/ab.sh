#!/bin/bash
# Run inside run_micro.sh (lab up): A = main (baa3528, /work/h24-base), B = h24, A B B A per
# collective in one lab; OSU loop, rank 0's mean (us). SPECS: coll:min:max (allgather: per rank).
PY=/work/main/.venv/bin/python; A=${A:-/work/h24-base}; B=${B:-/work/h24}; D=$(dirname $(readlink -f $0))
for v in A B; do
  [ $v = A ] && T=$A || T=$B
  echo "== model_report $v"
  PYTHONPATH=$T $PY -m nezha lab run --timeout 240 -- $PY $D/model_report.py | grep -E "^(STEP|RATES|TABLE)"
done
for spec in $SPECS; do
  IFS=: read coll lo hi <<< "$spec"
  for v in A B B A; do
    [ $v = A ] && T=$A || T=$B
    echo "== $coll $v"
    PYTHONPATH=$T $PY -m nezha lab run --timeout 240 -- $PY $T/bench/osu_$coll.py --backend nezha \
      -m $lo:$hi --time-budget ${TB:-0.3} | grep -v "^#" | awk 'NF>1{print $1, $2}'
  done
done
