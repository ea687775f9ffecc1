#!/bin/bash
# B's start-up measure beside the fast path's 8 B allreduce, 3 jobs (run.sh)
PY=/work/main/.venv/bin/python; B=/work/h22; D=$(dirname $(readlink -f $0))
for i in 1 2 3; do
  PYTHONPATH=$B $PY -m nezha lab run --timeout 240 -- $PY $D/step_report.py | grep -E "^(STEP|ALPHA|FAST|TABLE)"
done
