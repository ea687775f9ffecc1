#!/bin/bash
# issue 14, the final comparison (run under flock -x /tmp/nezha-quiet.lock): lab 4 hosts x 1
# rank, 2 x 400 Mbit/s; examples/train_ddp.py --model mlp --steps 15 --batch 16; 3 rounds ABBA
# of gloo (rail0), nezha as before (default progress thread) and nezha with
# NEZHA_PROGRESS_SCHED=fifo (rail0,rail1), all from this tree (hC)
exec $(dirname $0)/ddp.sh final 3 gloo:/work/hC:gloo nezha:/work/hC:nezha fifo:/work/hC:nezha:NEZHA_PROGRESS_SCHED=fifo
