#!/bin/bash
# Does the progress loop's sleep after NEZHA_SPIN_US (200 us) eat the burst credit? a 4 x 2
# lab, bench/idle_burst.py (idle 0 / 1.5 / 6 ms, 20 rounds), SPIN_US 200 (default) and
# 10000 (spins through every idle), interleaved, at 400 + 400 and at 3200 + 3200 Mbit/s.
# run as: flock -x /tmp/nezha-quiet.lock bash ring_spin.sh OUT
out=$1
PY=/work/main/.venv/bin/python
export NEZHA_LAB_NAME=hh PYTHONPATH=/work/hH
cd /work/hH
trap '$PY -m nezha lab down >/dev/null 2>&1' EXIT
$PY -m nezha lab up --hosts 4 --rails 2 --rate 400mbit --replace >/dev/null || exit 1
run() {  # size spin_us
  $PY -m nezha lab run --timeout 120 -x NEZHA_SOCKET_IFNAME=rail0,rail1 -x NEZHA_SPIN_US=$2 -- \
     $PY bench/idle_burst.py --size $1 --idle-ms 0,1.5,6 --calls 20 2>&1 \
     | $PY -c "import json,sys; t=sys.stdin.read(); d=json.loads(t[t.index('{'):t.rindex('}')+1]); print('$1 spin=$2', d['median_us'], d['vs_idle0'])"
}
{
echo "# $(date -u +%FT%TZ) lab 4 x 2, $(git -C /work/hH rev-parse --short HEAD)"
for rate in 400mbit 3200mbit; do
  $PY -m nezha lab rate 0 $rate >/dev/null; $PY -m nezha lab rate 1 $rate >/dev/null
  echo "## rails at $rate"
  for s in 256K 1M; do for spin in 200 10000 10000 200; do run $s $spin; done; done
done
} > $out 2>&1
