#!/bin/bash
# issue 17: medium sizes, every collective, 400+100 and 400+400, before (cec8c0a) vs after (main)
source /tmp/m18/lib.sh; lock; O=$R/medium; mkdir -p $O
cmp() { stamp "medium $1 $2 $3"; intree $1 $PY -m nezha bench compare --rates $3 \
   --collectives allreduce,allgather,reduce_scatter,broadcast --systems nezha-all,nezha-rail0,mpi-all,mpi-rail0 \
   --max-size 1M --reps 1 --reps-other 1 --no-lab-check --out $O/$2 > $O/$2.log 2>&1; }
cmp tcec het-before 400mbit,100mbit; cmp main het-after 400mbit,100mbit
cmp main eq-after 400mbit; cmp tcec eq-before 400mbit
stamp "medium done"
