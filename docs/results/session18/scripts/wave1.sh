#!/bin/bash
# wave 1 after the session's changes: compare --quick and failover, before (cec8c0a) vs after (main)
source /tmp/m18/lib.sh; lock; O=$R/wave1; mkdir -p $O
cmp() { stamp "wave1 compare $1 $2"; intree $1 $PY -m nezha bench compare --quick --max-size 64M \
   --systems nezha-all,nezha-rail0,mpi-all-ring --out $O/compare-$2 > $O/compare-$2.log 2>&1; }
fo() { stamp "wave1 failover $1 $2"; intree $1 $PY bench/failover.py --sizes 1K,64M --failures 4 \
   --json /tmp/m18/failover-$2.json > $O/failover-$2.log 2>&1; }
cmp main after-1; cmp tcec before-1; cmp main after-2; cmp tcec before-2
fo tcec before; fo main after
stamp "wave1 done"
