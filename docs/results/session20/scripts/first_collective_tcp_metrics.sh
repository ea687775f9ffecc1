#!/bin/bash
# Is the slow first collective of the first job after `lab up` TCP's per-destination
# metrics cache (empty in fresh namespaces)? jobs: fresh, warm, flushed metrics, warm.
set -u
cd /work/hD
PY=/work/main/.venv/bin/python
export PYTHONPATH=/work/hD NEZHA_LAB_NAME=hd
date -u; uptime
$PY -m nezha lab up --name hd --hosts 4 --rails 2 --rate 400mbit,100mbit > /tmp/hD-out3/lab-up.txt 2>&1
echo "lab up rc=$?"
job() {
    timeout 300 $PY bench/first_collective.py --lab hd --reps 1 --modes auto \
        -x NEZHA_RAIL_TIMEOUT=0.5 > /tmp/hD-out3/$1.txt 2>&1
    echo "$1 rc=$? $(grep '^auto' /tmp/hD-out3/$1.txt)"
}
metrics() { for h in 0 1 2 3; do echo "host $h: $($PY -m nezha lab exec --name hd $h ip tcp_metrics show 2>&1 | wc -l) entries"; done; }
metrics
job a-fresh
metrics
job b-warm
for h in 0 1 2 3; do $PY -m nezha lab exec --name hd $h ip tcp_metrics flush all; done
metrics
job c-flushed
job d-warm
for h in 0 1 2 3; do $PY -m nezha lab exec --name hd $h ip tcp_metrics flush all; done
job e-flushed
$PY -m nezha lab down --name hd >> /tmp/hD-out3/lab-up.txt 2>&1
echo "lab down rc=$?"; date -u; uptime
