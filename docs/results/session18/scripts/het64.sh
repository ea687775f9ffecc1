#!/bin/bash
# 400+100 and 400+400 medium sizes with the 64k default back (main), against cec8c0a again
source /tmp/m18/lib.sh; lock; O=$R/medium; mkdir -p $O
cmp() { stamp "medium $1 $2 $3"; intree $1 $PY -m nezha bench compare --rates $3 \
   --collectives allreduce,allgather,reduce_scatter,broadcast --systems nezha-all,nezha-rail0,mpi-all,mpi-rail0 \
   --max-size 1M --reps 1 --reps-other 1 --no-lab-check --out $O/$2 > $O/$2.log 2>&1; }
cmp main het-final 400mbit,100mbit; cmp tcec het-before2 400mbit,100mbit
stamp "medium 64k done"
