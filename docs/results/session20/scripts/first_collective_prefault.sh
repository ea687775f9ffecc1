#!/bin/bash
# Is the slow first collective the first touch of the failover snapshot's buffer? One job
# per driver run (as in first_collective_tcp_metrics.sh, where all 5 were slow),
# alternating --prefault (touch and free two payload-sized blocks first) and plain.
set -u
cd /work/hD
PY=/work/main/.venv/bin/python
export PYTHONPATH=/work/hD NEZHA_LAB_NAME=hd
date -u; uptime
$PY -m nezha lab up --name hd --hosts 4 --rails 2 --rate 400mbit,100mbit > /tmp/hD-out4/lab-up.txt 2>&1
echo "lab up rc=$?"
job() {
    name=$1; shift
    timeout 300 $PY bench/first_collective.py --lab hd --reps 1 --modes auto "$@" \
        -x NEZHA_RAIL_TIMEOUT=0.5 > /tmp/hD-out4/$name.txt 2>&1
    echo "$name rc=$? $(grep '^auto' /tmp/hD-out4/$name.txt)"
}
job p1 --prefault
job n1
job p2 --prefault
job n2
job p3 --prefault
job n3
$PY -m nezha lab down --name hd >> /tmp/hD-out4/lab-up.txt 2>&1
echo "lab down rc=$?"; date -u; uptime
