#!/bin/bash
# A lab of its own for bench/sync_cost.py (run under flock -x /tmp/nezha-quiet.lock): up,
# the job at each size, down. usage: sync_cost.sh RATES OUT.txt SIZE...
set -u
rates=$1 out=$2; shift 2
cd /work/hG
export PYTHONPATH=/work/hG
PY=/work/main/.venv/bin/python
$PY -m nezha lab up --name hgsync --hosts 4 --rails 2 --rate "$rates" >/dev/null
for size in "$@"; do
    echo "== $(date -u +%FT%TZ) rates $rates size $size"
    $PY -m nezha lab run --name hgsync --timeout 120 -x PYTHONPATH=/work/hG \
        -x NEZHA_SOCKET_IFNAME=rail0,rail1 -- $PY bench/sync_cost.py --size "$size"
done >> "$out" 2>&1
$PY -m nezha lab down --name hgsync
