#!/bin/bash
# one lab (4 hosts x 2 rails at $RATE, default 400mbit), the micro benchmark given, lab down;
# under the exclusive timing lock. usage: RATE=400mbit,100mbit run_micro.sh OUT CMD...
PY=/work/main/.venv/bin/python; D=$(dirname $(readlink -f $0)); T=${TREE:-$(cd $D/../../../../.. && pwd)}
OUT=$1; shift
export PYTHONPATH=$T NEZHA_LAB_NAME=h24
cd $T
flock -x /tmp/nezha-quiet.lock bash -c "
  echo \"\$(date -u +%H:%M:%S) start rate \${RATE:-400mbit} tree $T load \$(cut -d' ' -f1-3 /proc/loadavg): $*\" >> $OUT
  $PY -m nezha lab up --hosts \${HOSTS:-4} --ranks-per-host \${RPH:-1} --rails 2 --rate \${RATE:-400mbit} --replace > /dev/null 2>&1 || echo lab up failed >> $OUT
  $* >> $OUT 2>&1
  $PY -m nezha lab down > /dev/null 2>&1
  echo \"\$(date -u +%H:%M:%S) end\" >> $OUT"
