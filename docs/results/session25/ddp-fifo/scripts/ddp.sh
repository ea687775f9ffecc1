#!/bin/bash
# tools/ddp_rounds.sh of this tree for this note: OUTDIR relative to the note's directory,
# lab d25, launcher timeout 240 s (a run takes 40-130 s: a hang shows without eating the lock)
S=$(dirname $(dirname $(readlink -f $0))); D=$S/$1; shift
LAB=d25 TIMEOUT=${TIMEOUT:-240} MODEL_ARGS="${MODEL_ARGS:---model mlp --batch 2}" \
  exec $(dirname $(dirname $(dirname $(dirname $S))))/tools/ddp_rounds.sh $D "$@"
