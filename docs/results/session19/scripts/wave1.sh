#!/bin/bash
# wave 1 before (e73d223, last landing) vs after (main): compare --quick and failover, interleaved
source /tmp/m19/lib.sh; lock; O=/work/main/docs/results/session19/wave1; mkdir -p $O
st() { echo "$(date -u +%H:%M:%S) $*" >> $O/times.txt; }
cmp() { st "compare $1 $2"; intree $1 $PY -m nezha bench compare --quick --max-size 64M \
   --systems nezha-all,nezha-rail0,mpi-all-ring --out /tmp/m19/compare-$2 > $O/compare-$2.log 2>&1; }
fo() { st "failover $1 $2"; intree $1 $PY bench/failover.py --sizes 1K,64M --failures 4 \
   --json /tmp/m19/failover-$2.json > $O/failover-$2.log 2>&1; }
cmp main after-1; cmp t29 before-1; cmp t29 before-2; cmp main after-2
fo t29 before; fo main after
st "wave1 done"
