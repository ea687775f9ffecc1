#!/bin/bash
# A B B A: base/new on 400+400, then new/base on 400+100
run() { tree=$1 rates=$2 tag=$3
  cd /work/$tree && timeout 600 /work/main/.venv/bin/python -m nezha bench compare --rates $rates --collectives broadcast --systems nezha-all,mpi-all,mpi-rail0 --min-size 8K --max-size 256K --reps 3 --reps-other 3 --no-lab-check --out /tmp/h51/ab-$tag > /tmp/h51/ab-$tag.log 2>&1; echo "$tag rc=$? $(date -u +%T)"; }
echo start $(date -u +%T)
run h51-base 400mbit base-equal
run h51 400mbit new-equal
run h51 400mbit,100mbit new-unequal
run h51-base 400mbit,100mbit base-unequal
