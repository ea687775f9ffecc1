#!/bin/bash
# 4x2 64 KiB - 16 MiB: main vs cec8c0a vs main with the old 64k piece
source /tmp/m18/lib.sh; lock; O=$R/issue12/4x2-ab; mkdir -p $O
r() { stamp "4x2 $1 $2"; intree $1 env $3 $PY bench/ranks_per_host.py --hosts 4 --ranks-per-host 2 --systems nezha-all,mpi-best-default \
   --sizes 64K,1M,16M --reps 2 --json /tmp/m18/ab-$2.json --out $O/$2.md > $O/$2.log 2>&1; }
r main main X=1; r tcec cec X=1; r main main-64k NEZHA_MIN_RAIL_PIECE=64k
stamp "4x2 ab done"
