#!/bin/bash
# one lab (HOSTS x RPH, 2 rails of 400 Mbit/s), the A B B A script given, lab down; all under
# the exclusive timing lock. usage: HOSTS=4 RPH=1 run.sh OUT SCRIPT
PY=/work/main/.venv/bin/python
OUT=$1; shift
export PYTHONPATH=/work/h22 NEZHA_LAB_NAME=h22
cd /work/h22
flock -x /tmp/nezha-quiet.lock bash -c "
  echo \"\$(date -u +%H:%M:%S) start load \$(cut -d' ' -f1-3 /proc/loadavg): HOSTS=\${HOSTS:-4} RPH=\${RPH:-1} $*\" >> $OUT
  $PY -m nezha lab up --hosts \${HOSTS:-4} --ranks-per-host \${RPH:-1} --rails 2 --rate 400mbit --replace > /dev/null 2>&1 || echo lab up failed >> $OUT
  $* >> $OUT 2>&1
  $PY -m nezha lab down > /dev/null 2>&1
  echo \"\$(date -u +%H:%M:%S) end\" >> $OUT"
