#!/bin/bash
# session 25 (helper-25): what the real-time health thread costs, in one lab: the mlp at batch 2
# on 2 x 400 Mbit/s, NEZHA_PROGRESS_SCHED=fifo on this tree (health thread FIFO 2) and on main
# before it (baa3528 built in /work/h25-base: health thread ordinary), Gloo on rail0, 2 ABBA rounds
S=$(dirname $(readlink -f $0))
export MODEL_ARGS="--model mlp --batch 2"
flock -x /tmp/nezha-quiet.lock $S/ddp.sh mlp-r400-400-ab 400mbit 2 gloo:gloo:rail0 \
  fifo:nezha:rail0+rail1:NEZHA_PROGRESS_SCHED=fifo \
  base:nezha:rail0+rail1:NEZHA_PROGRESS_SCHED=fifo,PYTHONPATH=/work/h25-base
