#!/bin/bash
# nezha sim lab on every compare run of session 21 and the two stored ones, three models:
# before = main's sim (62b069d, /tmp/hG_before: git archive + this tree's built .so),
# fixed = lazy-feed + probe-rule fixes without the sync's time (--sync-ms 0),
# after = fixed + the sync's measured time inside its call (the default).
# run as: flock -s /tmp/nezha-quiet.lock bash scripts/variants.sh OUTDIR
out=$1; mkdir -p $out
PY=/work/main/.venv/bin/python
R=/work/hG/docs/results
for f in session21/sim-replay/{het,eq}-{1,2,3}/compare.json.gz compare-400mbit/compare.json.gz compare-400mbit-100mbit-session13/compare.json.gz; do
  n=$(echo $f | sed 's#session21/sim-replay/##; s#/compare.json.*##')
  (cd /tmp/hG_before && PYTHONPATH=/tmp/hG_before $PY -m nezha sim lab $R/$f --json $out/$n.before.json >/dev/null)
  (cd /work/hG && PYTHONPATH=/work/hG $PY -m nezha sim lab $R/$f --sync-ms 0 --json $out/$n.fixed.json >/dev/null)
  (cd /work/hG && PYTHONPATH=/work/hG $PY -m nezha sim lab $R/$f --json $out/$n.after.json >/dev/null)
done
