#!/bin/bash
# issue 14: DDP samples/s, Gloo vs nezha before (cec8c0a) vs after (main), lab 4x1, 2 x 400 Mbit/s
source /tmp/m18/lib.sh; lock; O=$R/ddp; mkdir -p $O
stamp "ddp start"
$PY -m nezha lab up --name dd18 --hosts 4 --rails 2 --rate 400mbit > $O/lab.log 2>&1
g() { intree main $PY -m nezha lab run --name dd18 --env-rendezvous --timeout 600 -x OMP_NUM_THREADS=1 -x GLOO_SOCKET_IFNAME=rail0 -- \
    $PY examples/train_ddp.py --backend gloo --model mlp --steps 15 --batch 16 > $O/gloo-$1.txt 2>&1; }
n() { intree $1 $PY -m nezha lab run --name dd18 --env-rendezvous --timeout 600 -x OMP_NUM_THREADS=1 -x NEZHA_SOCKET_IFNAME=rail0,rail1 -- \
    $PY examples/train_ddp.py --backend nezha --model mlp --steps 15 --batch 16 > $O/$2.txt 2>&1; }
for r in 1 2 3; do g $r; n tcec before-$r; n main after-$r; done
$PY -m nezha lab down --name dd18 >> $O/lab.log 2>&1
stamp "ddp done"
