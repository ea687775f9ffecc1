#!/bin/bash
# nezha sim lab on session 27's 400 + INA 100 runs (calibrated on session 26's nezha-rail0 rows)
out=$(pwd); cd /work/main
for n in slow-A1 slow-A2 slow-B1 slow-B2; do
  flock -s /tmp/nezha-quiet.lock timeout 1500 /work/main/.venv/bin/python -m nezha sim lab docs/results/session27/ina-window/$n/compare.json.gz \
    --calibration docs/results/session26/ina-sim/compare-400mbit-100mbit/compare.json.gz \
    > $out/$n.txt 2>&1
done
