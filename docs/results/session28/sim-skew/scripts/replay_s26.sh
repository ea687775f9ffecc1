#!/bin/bash
# nezha sim lab on session 26's three ina-sim runs (nezha-ina and nezha-rail0; the runs
# RANK_SKEW_S was fitted on, so the skew is in-sample here), with a given tree:
#   flock -s /tmp/nezha-quiet.lock bash replay_s26.sh TREE OUTDIR
tree=$1; out=$2; mkdir -p $out
PY=/work/main/.venv/bin/python
R=/work/h38/docs/results/session26/ina-sim
for n in compare-400mbit compare-400mbit-100mbit compare-100mbit-400mbit; do
  (cd $tree && PYTHONPATH=$tree timeout 1200 $PY -m nezha sim lab $R/$n/compare.json.gz --json $out/$n.json > $out/$n.txt)
done
