#!/bin/bash
# main (A) and this branch (B), A B B A, each: equal then 400+100, 2-32 KiB, 3 reps; run.sh takes the lock per step
D=$(dirname $(readlink -f $0))
export SYS=nezha-all,mpi-all,mpi-rail0,mpi-all-ring,mpi-rail0-ring LABNAME=h32
export EXTRA="--min-size 2K --max-size 32K --reps 3 --reps-other 3 --time-budget 0.3"
for t in main:A1 h32:B1 h32:B2 main:A2; do
  TREE=/work/${t%%:*} TAG=-${t##*:} OUTDIR=$D bash $D/../../session26/matrix/run.sh equal unequal
done
