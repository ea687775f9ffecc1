#!/bin/bash
# wave 1 before (48c9408, last landing, worktree /work/t30) vs after (main): compare --quick
# and failover, interleaved (tools/wave1.sh; this script had an inline copy); then the
# first 16 MiB allreduce after start (issue 15), quiet
/work/main/tools/wave1.sh /work/t30 /work/main /work/main/docs/results/session20/wave1
source /work/main/docs/results/session20/scripts/lib.sh; lock
O=/work/main/docs/results/session20/wave1; mkdir -p $O /tmp/m20
st() { echo "$(date -u +%H:%M:%S) $* load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt; }
st "first collective"
$PY -m nezha lab up --name fc --hosts 4 --rails 2 --rate 400mbit,100mbit > /tmp/m20/fc-lab.txt 2>&1
for i in 1 2 3 4 5 6 7 8 9 10; do
  intree main timeout 300 $PY bench/first_collective.py --lab fc --reps 1 --modes auto \
     -x NEZHA_RAIL_TIMEOUT=0.5 > /tmp/m20/fc-$i.txt 2>&1
  echo "job $i rc=$? load $(cut -d' ' -f1 /proc/loadavg) $(grep '^auto' /tmp/m20/fc-$i.txt)" >> $O/first-collective.txt
done
$PY -m nezha lab down --name fc >> /tmp/m20/fc-lab.txt 2>&1
st "wave1 done"
