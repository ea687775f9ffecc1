#!/bin/bash
# one lab run of osu.py: run1.sh H L TREE [extra lab-run args]
H=$1; L=$2; T=$3; shift 3
PY=/work/main/.venv/bin/python
export NEZHA_LAB_NAME=ha18
cd $T
PYTHONPATH=$T $PY -m nezha lab up --hosts $H --rails 2 --ranks-per-host $L --rate 400mbit --replace >/dev/null
PYTHONPATH=$T $PY -m nezha lab run --timeout 300 -x NEZHA_SOCKET_IFNAME=rail0,rail1 -x PYTHONPATH=$T -x OSU_CALLS=${OSU_CALLS:-2000} -x OSU_SIZES=${OSU_SIZES:-4} -x OSU_L=$L "$@" -- $PY /tmp/hA/osu.py 2>&1 | grep -E "^osu|Error|error" | head -5
PYTHONPATH=$T $PY -m nezha lab down >/dev/null
