#!/bin/bash
# Second A/B after the rab guard (f384055): allreduce and broadcast 1-8 KiB, A B B A per rate
# pair in one lock hold each; then one NEZHA_DEBUG=INFO start-up job on lab h53 (400 + 100)
# for the PLAN/TOPO lines. usage: ab2.sh OUTDIR
OUT=$1; mkdir -p $OUT
run() { tree=$1 rates=$2 tag=$3
  cd /work/$tree && timeout 600 /work/main/.venv/bin/python -m nezha bench compare --rates $rates \
    --collectives allreduce,broadcast --systems nezha-all,mpi-all,mpi-rail0 \
    --min-size 1K --max-size 8K --reps 3 --reps-other 3 --no-lab-check --out $OUT/ab-$tag > $OUT/ab-$tag.log 2>&1
  echo "$tag rc=$? $(date -u +%T)" >> $OUT/times.txt; gzip -f $OUT/ab-$tag/compare.json; }
echo "start $(date -u +%T)" >> $OUT/times.txt
flock -x /tmp/nezha-quiet.lock bash -c "$(declare -f run); OUT=$OUT; run h53-base 400mbit base-equal-1; run h53 400mbit new-equal-1; run h53 400mbit new-equal-2; run h53-base 400mbit base-equal-2"
flock -x /tmp/nezha-quiet.lock bash -c "$(declare -f run); OUT=$OUT; run h53 400mbit,100mbit new-unequal-1; run h53-base 400mbit,100mbit base-unequal-1; run h53-base 400mbit,100mbit base-unequal-2; run h53 400mbit,100mbit new-unequal-2;
  bash /work/h53/docs/results/session31/slice-cost/startup.sh /work/h53 $OUT/plan-info.json NEZHA_DEBUG=INFO REPS=0; echo \"plan rc=\$? \$(date -u +%T)\" >> $OUT/times.txt"
