#!/bin/bash
# two more ABBA rounds at 400 + 100 without Gloo given both devices (the ratios sat at 1.09-1.16)
S=$(dirname $(readlink -f $0))
flock -x /tmp/nezha-quiet.lock $S/ddp.sh r400-100b 400mbit,100mbit 2 \
  gloo:gloo:rail0 fifo:nezha:rail0+rail1:NEZHA_PROGRESS_SCHED=fifo nezha:nezha:rail0+rail1
