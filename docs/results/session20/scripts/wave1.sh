#!/bin/bash
# wave 1 before (48c9408, last landing, worktree /work/t30) vs after (main): compare --quick
# and failover, interleaved; then the first 16 MiB allreduce after start (issue 15), quiet
source /work/main/docs/results/session20/scripts/lib.sh; lock
O=/work/main/docs/results/session20/wave1; mkdir -p $O /tmp/m20
st() { echo "$(date -u +%H:%M:%S) $* load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt; }
cmp() { st "compare $1 $2"; intree $1 $PY -m nezha bench compare --quick --max-size 64M \
   --systems nezha-all,nezha-rail0,mpi-all-ring --out /tmp/m20/compare-$2 > $O/compare-$2.log 2>&1; }
fo() { st "failover $1 $2"; intree $1 $PY bench/failover.py --sizes 1K,64M --failures 4 \
   --json /tmp/m20/failover-$2.json > $O/failover-$2.log 2>&1; }
cmp main after-1; cmp t30 before-1; cmp t30 before-2; cmp main after-2
fo t30 before; fo main after
st "first collective"
$PY -m nezha lab up --name fc --hosts 4 --rails 2 --rate 400mbit,100mbit > /tmp/m20/fc-lab.txt 2>&1
for i in 1 2 3 4 5 6 7 8 9 10; do
  intree main timeout 300 $PY bench/first_collective.py --lab fc --reps 1 --modes auto \
     -x NEZHA_RAIL_TIMEOUT=0.5 > /tmp/m20/fc-$i.txt 2>&1
  echo "job $i rc=$? load $(cut -d' ' -f1 /proc/loadavg) $(grep '^auto' /tmp/m20/fc-$i.txt)" >> $O/first-collective.txt
done
$PY -m nezha lab down --name fc >> /tmp/m20/fc-lab.txt 2>&1
st "wave1 done"
