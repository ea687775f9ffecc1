#!/bin/bash
# per-phase profile of a 4 B allreduce, lab H x L (args: H L [tree])
H=$1; L=$2; T=${3:-/work/hI}
PY=/work/main/.venv/bin/python
export NEZHA_LAB_NAME=h16
cd $T
PYTHONPATH=$T $PY -m nezha lab up --hosts $H --rails 2 --ranks-per-host $L --rate 400mbit --replace >/dev/null
PYTHONPATH=$T PROF_L=$L $PY -m nezha lab run --timeout 300 -x NEZHA_SOCKET_IFNAME=rail0,rail1 -x PROF_L=$L -x PYTHONPATH=$T -x PROF_CALLS=${PROF_CALLS:-3000} $EXTRA -- $PY /tmp/h16/prof.py
PYTHONPATH=$T $PY -m nezha lab down >/dev/null
