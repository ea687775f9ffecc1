#!/bin/bash
# session 27: issue 14's DDP rows with the progress policy back at `auto` (session 26's default),
# the mlp at batch 2 (9 buckets) against Gloo on rail0 (and given both devices at 400 + 100),
# 2 ABBA rounds per lab, each lab under the exclusive lock. OUT defaults to this directory.
S=$(dirname $(readlink -f $0)); OUT=${OUT:-$S}; T=${TREE:-$(git -C $S rev-parse --show-toplevel)}
export MODEL_ARGS="--model mlp --batch 2" TREE=$T LAB=ddp27
flock -x /tmp/nezha-quiet.lock $T/tools/ddp_rounds.sh $OUT/mlp-r400-100 400mbit,100mbit 2 \
  gloo:gloo:rail0 gloo2:gloo:rail0+rail1 nezha:nezha:rail0+rail1
flock -x /tmp/nezha-quiet.lock $T/tools/ddp_rounds.sh $OUT/mlp-r400-400 400mbit 2 \
  gloo:gloo:rail0 nezha:nezha:rail0+rail1
for d in mlp-r400-100 mlp-r400-400; do /work/main/.venv/bin/python $T/tools/ddp_summary.py $OUT/$d > $OUT/$d/summary.txt; done
