#!/bin/bash
# one host, 4 ranks, shm: main vs cec8c0a, 1-16 MiB
source /tmp/m18/lib.sh; lock; O=$R/issue12/shm-ab; mkdir -p $O
for t in main tcec main tcec; do stamp "shm $t"; intree $t $PY bench/compare_loopback.py --backends nezha-shm,mpi-sm --reps 1 -m 1M:16M --time-budget 0.3 \
   --out /tmp/m18/lb-$t > $O/$t-$(date +%H%M%S).txt 2>&1; done
stamp "shm ab done"
