#!/bin/bash
# lab h45x: 4 hosts x 2 rails at 400mbit; the small reduce_scatter probe with the default
# planner, NEZHA_ALGO=rd and ring
set -x
N=/work/main/.venv/bin/python
cd /work/h45
timeout 120 $N -m nezha lab up --name h45x --hosts 4 --rails 2 --rate 400mbit --replace
P=/work/h45/docs/results/session29/rs-small/probe.py
for algo in auto rd ring; do
  timeout 180 $N -m nezha lab run --name h45x --timeout 170 -x PYTHONPATH=/work/h45 -x NEZHA_ALGO=$algo -x NEZHA_DEBUG=INFO -x NEZHA_SOCKET_IFNAME=rail0,rail1 -- $N $P 2048 4096 8192 16384 32768
done
timeout 120 $N -m nezha lab down --name h45x
