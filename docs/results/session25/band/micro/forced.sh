#!/bin/bash
# Run inside run_micro.sh (lab up): every algorithm forced, each size, OSU loop (rank 0's mean,
# us), and the model's table and choices of this job (NEZHA_DEBUG=INFO PLAN lines of rank 0).
# Allreduce: NEZHA_ALGO=rd|rab|ring; allgather / reduce_scatter: rd by the fixed rule
# (NEZHA_SMALL_MSG_THRESHOLD=1m), ring by NEZHA_ALGO=ring. piece1k: the same with
# NEZHA_MIN_RAIL_PIECE=1k (every split payload striped over both rails).
PY=/work/main/.venv/bin/python; T=$PWD; B=$T/bench
RUN="$PY -m nezha lab run --timeout 240"
M=${SIZES:-2048:131072}
for coll in ${COLLS:-allreduce allgather reduce_scatter}; do
  if [ $coll = allreduce ]; then vs="auto rd rab ring ${EXTRA_V:-}"; else vs="auto rd ring ${EXTRA_V:-}"; fi
  for v in $vs; do
    case $v in
      auto) x="" ;;
      rd) [ $coll = allreduce ] && x="-x NEZHA_ALGO=rd" || x="-x NEZHA_SMALL_MSG_THRESHOLD=1m" ;;
      rab) x="-x NEZHA_ALGO=rab" ;;
      ring) x="-x NEZHA_ALGO=ring" ;;
      ringp1k) x="-x NEZHA_ALGO=ring -x NEZHA_MIN_RAIL_PIECE=1k" ;;
      rabp1k) x="-x NEZHA_ALGO=rab -x NEZHA_MIN_RAIL_PIECE=1k" ;;
      autop1k) x="-x NEZHA_MIN_RAIL_PIECE=1k" ;;
    esac
    mm=$M; [ $coll = allgather ] && mm=$(( ${M%%:*} / 4 )):$(( ${M##*:} / 4 ))
    echo "== $coll $v"
    $RUN $x -- $PY $B/osu_$coll.py --backend nezha -m $mm --time-budget ${TB:-0.3} | grep -v "^#" | awk 'NF>1{print $1, $2}'
  done
done
