#!/bin/bash
PY=/work/main/.venv/bin/python; D=$(dirname $(readlink -f $0))
echo "== model_report"
$PY -m nezha lab run --timeout 240 -- $PY $D/model_report.py | grep -E "^(STEP|RATES|TABLE|MODEL)"
