#!/bin/bash
# issue 12's table on session 27's tree: 2 x 4 and 4 x 2, 2 rails of 400 Mbit/s, every system
# of the bar in one run per layout, 3 s per size and run (h34: 0.3 s times the 16 MiB call
# while the model still learns), under the exclusive timing lock. TREE: the checkout to run.
PY=/work/main/.venv/bin/python; D=$(dirname $(readlink -f $0)); T=${TREE:-/work/main}; cd $T
export PYTHONPATH=$T; mkdir -p /tmp/m27
exec 9>/tmp/nezha-quiet.lock; flock -x 9
for hl in "2 4" "4 2"; do
  set -- $hl
  echo "$(date -u +%H:%M:%S) ${1}x$2 $(git rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $D/times.txt
  $PY bench/ranks_per_host.py --hosts $1 --ranks-per-host $2 --systems \
    nezha-all,mpi-best-default,mpi-all,mpi-all-ring,gloo-rail0,gloo-all --reps 2 \
    --time-budget 3 --run-timeout 300 \
    --json /tmp/m27/rph-${1}x$2.json --out $D/${1}x$2.md > $D/${1}x$2.log 2>&1
done
echo "$(date -u +%H:%M:%S) end" >> $D/times.txt
