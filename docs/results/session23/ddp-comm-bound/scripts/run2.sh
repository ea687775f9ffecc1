#!/bin/bash
# session 23, after NEZHA_PROGRESS_SCHED=auto became the default: nezha with no setting
# against Gloo, the mlp (9 buckets) and the CNN at width 2048 (one 32 MiB bucket), both at
# batch 2 per rank; each lab under the exclusive lock (lab up ... lab down inside)
S=$(dirname $(readlink -f $0))
for m in "mlp:--model mlp --batch 2" "cnn:--model cnn --width 2048 --batch 2"; do
  n=${m%%:*}; export MODEL_ARGS="${m#*:}"
  flock -x /tmp/nezha-quiet.lock $S/ddp.sh $n-auto-r400-100 400mbit,100mbit 2 \
    gloo:gloo:rail0 gloo2:gloo:rail0+rail1 nezha:nezha:rail0+rail1
  flock -x /tmp/nezha-quiet.lock $S/ddp.sh $n-auto-r400-400 400mbit 2 \
    gloo:gloo:rail0 nezha:nezha:rail0+rail1
done
