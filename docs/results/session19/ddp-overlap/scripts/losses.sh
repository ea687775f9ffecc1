#!/bin/bash
# per-step losses: Gloo (rail0) writes them, nezha default and fifo (rail0,rail1) compare
# (train_ddp --compare-losses, 1e-4 relative); run under flock -x /tmp/nezha-quiet.lock
source $(dirname $0)/lib.sh
D=$O/losses; mkdir -p $D
labup; trap labdown EXIT
run() { intree /work/hC $PY -m nezha lab run --name $LAB --env-rendezvous --timeout 600 -x OMP_NUM_THREADS=1 "$@"; }
run -x GLOO_SOCKET_IFNAME=rail0 -- $PY examples/train_ddp.py --backend gloo --model mlp --steps 15 --batch 16 --losses $D/gloo.json > $D/gloo.txt 2>&1
run -x NEZHA_SOCKET_IFNAME=rail0,rail1 -- $PY examples/train_ddp.py --backend nezha --model mlp --steps 15 --batch 16 --losses $D/nezha.json --compare-losses $D/gloo.json > $D/nezha.txt 2>&1
run -x NEZHA_SOCKET_IFNAME=rail0,rail1 -x NEZHA_PROGRESS_SCHED=fifo -- $PY examples/train_ddp.py --backend nezha --model mlp --steps 15 --batch 16 --losses $D/fifo.json --compare-losses $D/gloo.json > $D/fifo.txt 2>&1
