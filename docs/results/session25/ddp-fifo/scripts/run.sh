#!/bin/bash
# session 25 (helper-25): nezha with NEZHA_PROGRESS_SCHED=fifo (progress thread FIFO 1, health
# thread FIFO 2, heartbeats that never wait for another writer) against Gloo on rail0, the mlp
# (9 buckets) and the CNN at width 2048 (one 32 MiB bucket), batch 2 per rank, 2 ABBA rounds;
# Gloo given both devices (gloo2) for the mlp at 400+100. Each lab under the exclusive lock.
S=$(dirname $(readlink -f $0)); F=nezha:nezha:rail0+rail1:NEZHA_PROGRESS_SCHED=fifo
export MODEL_ARGS="--model mlp --batch 2"
flock -x /tmp/nezha-quiet.lock $S/ddp.sh mlp-r400-100 400mbit,100mbit 2 gloo:gloo:rail0 gloo2:gloo:rail0+rail1 $F
flock -x /tmp/nezha-quiet.lock $S/ddp.sh mlp-r400-400 400mbit 2 gloo:gloo:rail0 $F
export MODEL_ARGS="--model cnn --width 2048 --batch 2"
flock -x /tmp/nezha-quiet.lock $S/ddp.sh cnn-r400-100 400mbit,100mbit 2 gloo:gloo:rail0 $F
flock -x /tmp/nezha-quiet.lock $S/ddp.sh cnn-r400-400 400mbit 2 gloo:gloo:rail0 $F
