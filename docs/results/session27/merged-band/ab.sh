#!/bin/bash
# session 27: the merged tree (main, "M") against the session's start (0facf34, "S"), allreduce
# and broadcast 2-32 KiB with Open MPI's rows, equal then 400+100 rails, M S S M; run.sh takes
# the exclusive lock per step. Trees: M=/work/main, S=/work/base27 (checkouts, extensions built).
D=$(dirname $(readlink -f $0))
export SYS=nezha-all,mpi-all,mpi-rail0,mpi-all-ring,mpi-rail0-ring LABNAME=s27 COLL=allreduce,broadcast
export EXTRA="--min-size 2K --max-size 32K --reps 3 --reps-other 3 --time-budget 0.3"
for t in main:M1 base27:S1 base27:S2 main:M2; do
  TREE=/work/${t%%:*} TAG=-${t##*:} OUTDIR=$D bash $D/../../session26/matrix/run.sh ${STEPS:-equal unequal}
done
