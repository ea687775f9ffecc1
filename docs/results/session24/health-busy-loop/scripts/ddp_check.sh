#!/bin/bash
# under flock -x: one lab (4 hosts x 1 rank, rails 400 + 100 Mbit/s), the CNN (width 2048,
# batch 2, 15 steps) over nezha on both rails with NEZHA_PROGRESS_SCHED=fifo, per tree in $@
# (a tree name ending in -rt also runs its health thread at SCHED_FIFO 2: ee1c0ba re-applied)
PY=/work/main/.venv/bin/python; LAB=h20; D=${D:-/tmp/h20/ddp}; mkdir -p $D
cd /work/h20 && $PY -m nezha lab up --name $LAB --hosts 4 --rails 2 --rate 400mbit,100mbit >> $D/lab.log 2>&1 || exit 1
trap 'cd /work/h20 && $PY -m nezha lab down --name $LAB >> $D/lab.log 2>&1' EXIT
i=0
for T in "$@"; do
  i=$((i+1)); n=$(basename $T)-$i; t0=$(date +%s)
  (cd $T && PYTHONPATH=$T timeout 400 $PY -m nezha lab run --name $LAB --env-rendezvous --timeout ${TMO:-300} \
    -x OMP_NUM_THREADS=1 -x NEZHA_SOCKET_IFNAME=rail0,rail1 -x NEZHA_PROGRESS_SCHED=fifo -- \
    $PY examples/train_ddp.py --backend nezha --model cnn --width 2048 --batch 2 --steps 15 > $D/$n.txt 2>&1)
  echo "$n rc=$? $(( $(date +%s) - t0 ))s $(grep -c 'samples/s' $D/$n.txt) samples/s lines; $(grep -ci 'unreachable\|silence' $D/$n.txt) silence/unreachable lines" | tee -a $D/summary.txt
done
