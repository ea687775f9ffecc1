#!/bin/bash
# A/B: main (baseline worktree /work/h53-base) against h53 (/work/h53), lab 4 x 1 built by
# bench compare; one lock hold per rate pair, A B B A (400+400) then B A A B (400+100).
# usage: ab.sh OUTDIR
OUT=$1; mkdir -p $OUT
run() { tree=$1 rates=$2 tag=$3
  cd /work/$tree && timeout 900 /work/main/.venv/bin/python -m nezha bench compare --rates $rates \
    --collectives allreduce,broadcast,allgather,reduce_scatter --systems nezha-all,mpi-all,mpi-rail0 \
    --min-size 1K --max-size 32K --reps 3 --reps-other 3 --no-lab-check --out $OUT/ab-$tag > $OUT/ab-$tag.log 2>&1
  echo "$tag rc=$? $(date -u +%T)" >> $OUT/times.txt; gzip -f $OUT/ab-$tag/compare.json; }
echo "start $(date -u +%T)" >> $OUT/times.txt
flock -x /tmp/nezha-quiet.lock bash -c "$(declare -f run); OUT=$OUT; run h53-base 400mbit base-equal-1; run h53 400mbit new-equal-1; run h53 400mbit new-equal-2; run h53-base 400mbit base-equal-2"
flock -x /tmp/nezha-quiet.lock bash -c "$(declare -f run); OUT=$OUT; run h53 400mbit,100mbit new-unequal-1; run h53-base 400mbit,100mbit base-unequal-1; run h53-base 400mbit,100mbit base-unequal-2; run h53 400mbit,100mbit new-unequal-2"
