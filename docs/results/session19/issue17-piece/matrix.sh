#!/bin/bash
# usage: RUNS="label|K=V K=V\n..." [H=4 L=2] flock -x /tmp/nezha-quiet.lock ./matrix.sh  (probe.py at /tmp/hB/probe.py)
# runs "label|env..." lines from $RUNS in one lab; prints rank 0's summary line
cd /work/hB; export PYTHONPATH=${TREE:-/work/hB}; PY=/work/main/.venv/bin/python; N=hbl
nz() { $PY -m nezha lab "$@"; }
nz up --name $N --hosts ${H:-4} --rails 2 --ranks-per-host ${L:-2} --rate ${RATE:-400mbit} --replace > /tmp/hB/up.log 2>&1
while IFS='|' read -r label envs; do
  [ -z "$label" ] && continue
  xs=""; for kv in $envs; do xs="$xs -x $kv"; done
  echo "$label $(nz run --name $N --timeout 120 $xs -- $PY /tmp/hB/probe.py 2>&1 | grep '"rank": 0,' | cut -c1-${W:-200})"
done <<< "$RUNS"
nz down --name $N > /dev/null 2>&1
