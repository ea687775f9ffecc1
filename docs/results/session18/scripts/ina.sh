#!/bin/bash
# issue 13: INA small allreduce, service SCHED_BATCH without spin (main) vs before (cec8c0a)
source /tmp/m18/lib.sh; lock; O=$R/ina-small; mkdir -p $O
cmp() { stamp "ina $1 $2"; intree $1 $PY -m nezha bench compare --ina 1 --hosts 4 --rails 2 --rates 400mbit \
   --collectives allreduce --systems nezha-rail1,nezha-ina-small,gloo-rail0 --min-size 4 --max-size 1K --reps 3 \
   --no-lab-check --out $O/$2 > $O/$2.log 2>&1; }
cmp tcec before-1; cmp main after-1; cmp main after-2; cmp tcec before-2
stamp "ina done"
