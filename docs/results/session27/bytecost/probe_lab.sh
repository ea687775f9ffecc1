#!/bin/bash
# the probe job in a fresh lab per rate set; TREE (default this worktree); outputs to stdout
PY=/work/main/.venv/bin/python; T=${TREE:-/work/h32}; D=$(dirname $(readlink -f $0)); export PYTHONPATH=$T
for rates in ${RATES:-400mbit 400mbit,100mbit}; do
  $PY -m nezha lab up --name h32 --hosts 4 --rails 2 --rate $rates --replace >/dev/null
  for i in 1 2; do echo "== $rates $(git -C $T rev-parse --short HEAD) $*"; timeout 120 $PY -m nezha lab run --name h32 --timeout 100 "$@" -- $PY $D/probe_job.py 2>&1 | grep -v '^$' | tail -3; done
  $PY -m nezha lab down --name h32 >/dev/null
done
