#!/bin/bash
# Does the progress loop's sleep after NEZHA_SPIN_US (200 us) eat the burst credit? a 4 x 2
# lab, bench/idle_burst.py (idle 0 / 1.5 / 6 ms, 20 rounds), SPIN_US 200 (default) and
# 10000 (spins through every idle), interleaved, at 400 + 400 and at 3200 + 3200 Mbit/s.
# run as: flock -x /tmp/nezha-quiet.lock bash ring_spin.sh OUT
out=$1
source "$(dirname "$0")/ring_lib.sh"
{
echo "# $(date -u +%FT%TZ) lab 4 x 2, $(git -C /work/hH rev-parse --short HEAD)"
for rate in 400mbit 3200mbit; do
  $PY -m nezha lab rate 0 $rate >/dev/null; $PY -m nezha lab rate 1 $rate >/dev/null
  echo "## rails at $rate"
  for s in 256K 1M; do for spin in 200 10000 10000 200; do run $s NEZHA_SPIN_US=$spin; done; done
done
} > $out 2>&1
