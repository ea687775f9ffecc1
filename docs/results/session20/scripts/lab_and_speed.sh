#!/bin/bash
# Issue 15/16 audit's timed and lab checks, run once under the exclusive lock:
#   flock -x /tmp/nezha-quiet.lock bash docs/results/session20/scripts/lab_and_speed.sh OUTDIR
# 1. the simulator's speed bar (512-rank fat-tree ring allreduce of 1 GiB < 60 s);
# 2. the lab tests of rail formation (3 rails + mgmt, no interface named) and the probe;
# 3. the first 16 MiB allreduce after start on 400 + 100 Mbit/s vs the learned optimum.
# Every lab is built and taken down inside this script.
set -u
cd /work/hD
OUT=${1:-/tmp/hD-out}
mkdir -p "$OUT"
PY=/work/main/.venv/bin/python
export PYTHONPATH=/work/hD
export NEZHA_LAB_NAME=hd
date -u; uptime
echo "== sim speed"
timeout 600 $PY -m nezha sim speed --cases ring --json "$OUT/speed.json" > "$OUT/speed.txt" 2>&1
echo "rc=$?"; date -u; uptime
echo "== sim run 512 (the user's command)"
/usr/bin/time -f "wall %e s, maxrss %M KB" timeout 600 $PY -m nezha sim run --fabric fattree -k 16 \
    --ranks 512 --algo nezha --nezha-algo ring --scheme ecmp --sizes 1G > "$OUT/sim-run-512.txt" 2>&1
echo "rc=$?"; date -u; uptime
echo "== lab tests"
timeout 900 $PY -m pytest -q -p no:cacheprovider -m lab tests/test_topo_rails.py \
    tests/test_rate_probe.py > "$OUT/lab-tests.txt" 2>&1
echo "rc=$?"; date -u; uptime
echo "== first collective"
$PY -m nezha lab up --name hd --hosts 4 --rails 2 --rate 400mbit,100mbit > "$OUT/lab-up.txt" 2>&1
echo "lab up rc=$?"
timeout 900 $PY bench/first_collective.py --lab hd --reps 4 --modes auto,off \
    -x NEZHA_RAIL_TIMEOUT=0.5 --json "$OUT/first-collective.json" > "$OUT/first-collective.txt" 2>&1
echo "rc=$?"
$PY -m nezha lab down --name hd >> "$OUT/lab-up.txt" 2>&1
echo "lab down rc=$?"; date -u; uptime
