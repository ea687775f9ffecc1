#!/bin/bash
# one lab (4 hosts x 2 rails at $RATE, default 400mbit), the command given, lab down; all under
# the exclusive timing lock. usage: RATE=400mbit,100mbit run_micro.sh OUT CMD...
PY=/work/main/.venv/bin/python; D=$(dirname $(readlink -f $0)); T=${TREE:-$(cd $D/../../../.. && pwd)}
OUT=$1; shift
export PYTHONPATH=$T NEZHA_LAB_NAME=h28
cd $T
L="flock -x /tmp/nezha-quiet.lock"; [ -n "$FLOCKED" ] && L=""   # the caller holds it
$L bash -c "
  echo \"\$(date -u +%H:%M:%S) start rate \${RATE:-400mbit} tree $T \$(git -C $T rev-parse --short HEAD) load \$(cut -d' ' -f1-3 /proc/loadavg): $*\" >> $OUT
  timeout 1500 $PY -m nezha lab up --hosts 4 --ranks-per-host 1 --rails 2 --rate \${RATE:-400mbit} --replace > /dev/null 2>&1 || echo lab up failed >> $OUT
  timeout 1400 $* >> $OUT 2>&1
  $PY -m nezha lab down > /dev/null 2>&1
  echo \"\$(date -u +%H:%M:%S) end\" >> $OUT"
