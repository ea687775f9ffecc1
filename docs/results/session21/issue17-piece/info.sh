#!/bin/bash
# The PLAN line of a real job (NEZHA_DEBUG=INFO) on 4 x 1, 4 x 2 and 8 x 1 (hosts x ranks),
# 2 x 400 Mbit/s: which min rail piece auto picked on every rank. Run under flock -x.
PY=/work/main/.venv/bin/python; export NEZHA_LAB_NAME=nzhf PYTHONPATH=/work/hF
cd /work/hF
for HL in 4:1 4:2 8:1; do
  H=${HL%:*} L=${HL#*:}
  $PY -m nezha lab up --hosts $H --rails 2 --rate 400mbit --ranks-per-host $L >/dev/null
  $PY -m nezha lab run --timeout 120 -x NEZHA_DEBUG=INFO -x NEZHA_DEBUG_SUBSYS=PLAN \
      -x PYTHONPATH=/work/hF -- $PY /work/hF/docs/results/session21/issue17-piece/piece_job.py 2>&1 | grep -o "min rail piece [^)]*)" | sort | uniq -c | sed "s/^/$HL /"
  $PY -m nezha lab down >/dev/null
done
