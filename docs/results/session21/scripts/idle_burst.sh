#!/bin/bash
# issue 16: an allreduce's time after the links idled, 4 hosts x 1 rank, 400 + 400 Mbit/s
source /work/main/docs/results/session21/scripts/lib.sh; lock
O=/work/main/docs/results/session21/idle-burst; mkdir -p $O
cd /work/main
$PY -m nezha lab up --name ib --hosts 4 --rails 2 --rate 400mbit > /tmp/m21/ib-lab.txt 2>&1
for size in 512K 1M 4M; do
  $PY -m nezha lab run --name ib --timeout 300 -x NEZHA_SOCKET_IFNAME=rail0,rail1 -- \
     $PY bench/idle_burst.py --size $size --json $O/idle-$size.json > $O/idle-$size.log 2>&1
done
$PY -m nezha lab down --name ib >> /tmp/m21/ib-lab.txt 2>&1
