#!/bin/bash
# wave 1 before (a2b773c, last landing, worktree /work/b22) vs after (main): compare --quick
# and failover, interleaved (session 22)
source /work/main/docs/results/session22/scripts/lib.sh; lock
O=/work/main/docs/results/session22/wave1; mkdir -p $O /tmp/m22
st() { echo "$(date -u +%H:%M:%S) $* load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt; }
cmp() { st "compare $1 $2"; intree $1 $PY -m nezha bench compare --quick --max-size 64M \
   --systems nezha-all,nezha-rail0,mpi-all-ring --out /tmp/m22/compare-$2 > $O/compare-$2.log 2>&1; }
fo() { st "failover $1 $2"; intree $1 $PY bench/failover.py --sizes 1K,64M --failures 4 \
   --json /tmp/m22/failover-$2.json > $O/failover-$2.log 2>&1; }
cmp main after-1; cmp b22 before-1; cmp b22 before-2; cmp main after-2
fo b22 before; fo main after
st "wave1 done"
