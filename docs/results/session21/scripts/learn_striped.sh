#!/bin/bash
# costmodel.learn_striped: one-channel records no longer sync a COLD bucket after every call.
# before = /work/t32 (the merge before it), after = main; 4 hosts x 1 rank, 400 + 100 Mbit/s;
# calls 10..19's median of back-to-back allreduces (bench/first_collective.py), ABBA x 2.
source /work/main/docs/results/session21/scripts/lib.sh; lock
O=/work/main/docs/results/session21/learn-striped; mkdir -p $O
$PY -m nezha lab up --name ls --hosts 4 --rails 2 --rate 400mbit,100mbit > /tmp/m21/ls-lab.txt 2>&1
one() {  # tree size env label
  intree $1 timeout 300 $PY bench/first_collective.py --lab ls --reps 1 --modes auto --size $2 \
     --count 30 -x $3 > /tmp/m21/ls-out.txt 2>&1
  echo "$4 $1 $2 $3 $(grep '^auto' /tmp/m21/ls-out.txt)" >> $O/runs.txt
}
for round in 1 2; do
  for t in main t32 t32 main; do
    one $t 256K NEZHA_MIN_RAIL_PIECE=64k "r$round"
    one $t 1M NEZHA_MAX_RAILS=1 "r$round"
    one $t 4M NEZHA_MAX_RAILS=1 "r$round"
  done
done
$PY -m nezha lab down --name ls >> /tmp/m21/ls-lab.txt 2>&1
