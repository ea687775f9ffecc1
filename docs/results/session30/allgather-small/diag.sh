#!/bin/bash
# lab h46x: 4 hosts x 2 rails at 400mbit; the small allgather / allreduce probe (probe.py) with
# the default planner and forced variants. TREE=/work/h46 or /work/h46-base.
set -x
N=/work/main/.venv/bin/python
T=${TREE:-/work/h46}
cd $T
timeout 120 $N -m nezha lab up --name h46x --hosts 4 --rails 2 --rate 400mbit --replace
P=/work/h46/docs/results/session30/allgather-small/probe.py
run() { timeout 170 $N -m nezha lab run --name h46x --timeout 160 -x PYTHONPATH=$T -x NEZHA_DEBUG=INFO -x NEZHA_SOCKET_IFNAME=rail0,rail1 -x PR_ITERS=600 "$@"; }
run -x NEZHA_ALGO=auto -- $N $P allgather 512 1024 2048 4096
run -x NEZHA_MAX_RAILS=1 -- $N $P allgather 512 1024 2048 4096
run -x NEZHA_ALGO=ring -- $N $P allgather 1024 2048
run -x NEZHA_ALGO=auto -- $N $P allreduce 2048 4096 8192
run -x NEZHA_MAX_RAILS=1 -- $N $P allreduce 2048 4096 8192
run -x NEZHA_ALGO=rd -- $N $P allreduce 4096 8192
run -x NEZHA_ALGO=rab -- $N $P allreduce 4096 8192
run -x NEZHA_ALGO=rab -x NEZHA_MAX_RAILS=1 -- $N $P allreduce 4096 8192
timeout 120 $N -m nezha lab down --name h46x
