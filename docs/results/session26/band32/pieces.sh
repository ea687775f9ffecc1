#!/bin/bash
# Run inside run_micro.sh (lab up), one tree: variants given as NAME=ENV[,ENV] in $VARIANTS,
# run in the order V1..Vn Vn..V1 per collective (A B B A for two), OSU loop, rank 0's mean (us).
# Before them the model report of the first variant (REPORT: of these) (step, rates, switch
# table, choice and channels per size).
# SPECS: coll:min:max (allgather: per rank).
PY=/work/main/.venv/bin/python; D=$(dirname $(readlink -f $0)); T=$PWD
RUN="$PY -m nezha lab run --timeout 240"
VARIANTS=${VARIANTS:-"p32=NEZHA_MIN_RAIL_PIECE=32k p16=NEZHA_MIN_RAIL_PIECE=16k"}
envs() { local x=""; IFS=, read -ra kv <<< "${1#*=}"; for e in "${kv[@]}"; do [ -n "$e" ] && x="$x -x $e"; done; echo $x; }
for v in ${REPORT:-${VARIANTS%% *}}; do
  [ "$v" = none ] && continue
  echo "== model_report ${v%%=*}"
  $RUN $(envs $v) -- $PY $D/model_report.py | grep -E "^(STEP|RATES|TABLE|MODEL)"
done
rev=$(echo $VARIANTS | tr ' ' '\n' | tac | tr '\n' ' ')
for spec in $SPECS; do
  IFS=: read coll lo hi <<< "$spec"
  for v in $VARIANTS $rev; do
    echo "== $coll ${v%%=*}"
    # a variant with PYTHONPATH=tree runs that tree's bench script (it puts its own tree first)
    tb=$T; case "$v" in *PYTHONPATH=*) tb=${v#*PYTHONPATH=}; tb=${tb%%,*} ;; esac
    $RUN $(envs $v) -- $PY $tb/bench/osu_$coll.py --backend nezha -m $lo:$hi --time-budget ${TB:-0.3} \
      | grep -v "^#" | awk 'NF>1{print $1, $2}'
  done
done
