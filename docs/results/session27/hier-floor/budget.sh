#!/bin/bash
# issue 12's table setting (--time-budget 0.3: one timed 16 MiB call) against 3.0 s, main,
# nezha-all only, 2 x 4, one lock hold
D=$(dirname $(readlink -f $0)); O=$D/budget; mkdir -p $O
PY=/work/main/.venv/bin/python
exec 9>/tmp/nezha-quiet.lock; flock -x 9
for b in 0.3 3.0 0.3 3.0; do
  n=$((n+1))
  echo "$(date -u +%H:%M:%S) budget $b load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  cd /work/main && timeout 900 $PY /work/main/bench/ranks_per_host.py --hosts 2 --ranks-per-host 4 \
    --systems nezha-all --sizes 4,1K,64K,1M,16M --reps 1 --time-budget $b \
    --json /tmp/h34-budget-$n.json --out $O/$n-budget$b.md > $O/$n-budget$b.log 2>&1
done
