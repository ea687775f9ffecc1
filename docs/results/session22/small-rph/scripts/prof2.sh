#!/bin/bash
H=$1; L=$2; T=/work/hI-prof
PY=/work/main/.venv/bin/python
export NEZHA_LAB_NAME=h16
cd $T
PYTHONPATH=$T $PY -m nezha lab up --hosts $H --rails 2 --ranks-per-host $L --rate 400mbit --replace >/dev/null
PYTHONPATH=$T $PY -m nezha lab run --timeout 300 -x NEZHA_SOCKET_IFNAME=rail0,rail1 -x PROF_L=$L -x PYTHONPATH=$T $EXTRA -- $PY /tmp/h16/prof2.py
PYTHONPATH=$T $PY -m nezha lab down >/dev/null
