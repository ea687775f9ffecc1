#!/bin/bash
# nezha sim lab (default: the tbf replay) on the six session-21 runs and the two older stored
# ones; one JSON per run into OUTDIR. Run as:
#   flock -s /tmp/nezha-quiet.lock bash replay.sh TREE OUTDIR
tree=$1; out=$2; mkdir -p $out
PY=/work/main/.venv/bin/python
R=$tree/docs/results
for f in session21/sim-replay/{het,eq}-{1,2,3}/compare.json.gz compare-400mbit/compare.json.gz compare-400mbit-100mbit-session13/compare.json.gz; do
  n=$(echo $f | sed 's#session21/sim-replay/##; s#/compare.json.*##')
  (cd $tree && PYTHONPATH=$tree timeout 1200 $PY -m nezha sim lab $R/$f --json $out/$n.json > $out/$n.txt)
done
