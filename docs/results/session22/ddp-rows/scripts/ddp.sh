#!/bin/bash
# issue 14: the mlp at batch 16, the rounds of this note (tools/ddp_rounds.sh, run from helper-17's
# worktree /work/hJ then); usage as tools/ddp_rounds.sh, OUTDIR relative to this note's directory
S=$(dirname $(dirname $(readlink -f $0))); D=$S/$1; shift
TREE=/work/hJ LAB=hj MODEL_ARGS="--model mlp --batch 16" exec /work/main/tools/ddp_rounds.sh $D "$@"
