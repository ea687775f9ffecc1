#!/bin/bash
set -u
cd /work/hD
PY=/work/main/.venv/bin/python
export PYTHONPATH=/work/hD NEZHA_LAB_NAME=hd
date -u; uptime
$PY -m nezha lab up --name hd --hosts 4 --rails 2 --rate 400mbit,100mbit > /tmp/hD-out2/lab-up.txt 2>&1
echo "lab up rc=$?"
timeout 900 $PY bench/first_collective.py --lab hd --reps 8 --modes auto \
    -x NEZHA_RAIL_TIMEOUT=0.5 --json /tmp/hD-out2/first-collective-auto8.json > /tmp/hD-out2/first-collective-auto8.txt 2>&1
echo "rc=$?"
$PY -m nezha lab down --name hd >> /tmp/hD-out2/lab-up.txt 2>&1
echo "lab down rc=$?"; date -u; uptime
