#!/bin/bash
# main vs h34, A B B A per layout: bench/ranks_per_host.py nezha-all only, 4/16/64 MiB,
# 2 rails of 400mbit, one lock hold per layout
D=$(dirname $(readlink -f $0)); O=$D/ab; mkdir -p $O
PY=/work/main/.venv/bin/python
for hl in "2 4" "4 2"; do
  set -- $hl
  (
  flock -x 9
  for t in main h34 h34 main; do
    n=$((n+1))
    echo "$(date -u +%H:%M:%S) ${1}x$2 $t load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
    cd /work/$t && timeout 900 $PY /work/$t/bench/ranks_per_host.py --hosts $1 --ranks-per-host $2 \
      --systems nezha-all --sizes 4M,16M,64M --reps 1 --time-budget 3.0 \
      --json /tmp/h34-ab-${1}x$2-$n-$t.json --out $O/${1}x$2-$n-$t.md > $O/${1}x$2-$n-$t.log 2>&1
  done
  ) 9>/tmp/nezha-quiet.lock
done
echo "$(date -u +%H:%M:%S) end" >> $O/times.txt
