#!/bin/bash
# lab h46x: 4 hosts x 2 rails at 400mbit; probe.py with a barrier after each call (the OSU
# loop): allgather 1 / 2 KiB a rank on main (h46-base) and h46, and forced plans on h46;
# allreduce 4 KiB rd / rab / auto
set -x
N=/work/main/.venv/bin/python
timeout 120 $N -m nezha lab up --name h46x --hosts 4 --rails 2 --rate 400mbit --replace
P=/work/h46/docs/results/session30/allgather-small/probe.py
run() { T=$1; shift; cd $T; timeout 170 $N -m nezha lab run --name h46x --timeout 160 -x PYTHONPATH=$T -x NEZHA_DEBUG=INFO -x NEZHA_SOCKET_IFNAME=rail0,rail1 -x PR_ITERS=1000 -x PR_BARRIER=1 "$@"; }
for t in /work/h46-base /work/h46 /work/h46 /work/h46-base; do
  run $t -- $N $P allgather 512 1024 2048
done
run /work/h46 -x NEZHA_ALGO=direct -- $N $P allgather 1024 2048
run /work/h46 -x NEZHA_ALGO=ring -- $N $P allgather 1024
run /work/h46 -x NEZHA_MAX_RAILS=1 -x NEZHA_ALGO=rd -- $N $P allgather 1024 2048
for a in rd rab auto rab rd; do
  run /work/h46 -x NEZHA_ALGO=$a -- $N $P allreduce 2048 4096
done
timeout 120 $N -m nezha lab down --name h46x
