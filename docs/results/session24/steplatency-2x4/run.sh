#!/bin/bash
# usage: run.sh OUT   (one 2 x 4 lab, 2 rails of 400 Mbit/s, ab_model.sh, lab down; exclusive lock)
PY=/work/main/.venv/bin/python; OUT=$1; D=$(dirname $(readlink -f $0))
cd /work/main
flock -x /tmp/nezha-quiet.lock bash -c "
  echo \"\$(date -u +%H:%M:%S) start load \$(cut -d' ' -f1-3 /proc/loadavg)\" >> $OUT
  $PY -m nezha lab up --hosts 2 --ranks-per-host 4 --rails 2 --rate 400mbit --replace > /dev/null 2>&1 || echo lab up failed >> $OUT
  bash $D/ab_model.sh >> $OUT 2>&1
  $PY -m nezha lab down > /dev/null 2>&1
  echo \"\$(date -u +%H:%M:%S) end\" >> $OUT"
