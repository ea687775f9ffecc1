#!/bin/bash
# the rounds of this note (tools/ddp_rounds.sh) for a communication-bound step: the mlp at
# batch 2 per rank; usage as tools/ddp_rounds.sh, OUTDIR relative to this note's directory
S=$(dirname $(dirname $(readlink -f $0))); D=$S/$1; shift
LAB=d23 MODEL_ARGS="${MODEL_ARGS:---model mlp --batch 2}" exec /work/main/tools/ddp_rounds.sh $D "$@"
