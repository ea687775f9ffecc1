#!/bin/bash
# session 23: the DDP rows for a communication-bound step (mlp, batch 2 per rank), each lab
# under the exclusive lock (lab up ... lab down inside)
S=$(dirname $(readlink -f $0))
flock -x /tmp/nezha-quiet.lock $S/ddp.sh r400-100 400mbit,100mbit 2 \
  gloo:gloo:rail0 gloo2:gloo:rail0+rail1 nezha:nezha:rail0+rail1 fifo:nezha:rail0+rail1:NEZHA_PROGRESS_SCHED=fifo
flock -x /tmp/nezha-quiet.lock $S/ddp.sh r400-400 400mbit 2 \
  gloo:gloo:rail0 fifo:nezha:rail0+rail1:NEZHA_PROGRESS_SCHED=fifo nezha:nezha:rail0+rail1
