#!/bin/bash
# after the forced band (pid 27004): one hold for the old/new A B B A on equal rails (the
# forced-equal run's "new" ran main's bench script, so main's code), then the matrix reruns
while kill -0 27004 2>/dev/null; do sleep 3; done
M=/work/h28/docs/results/session26/matrix; B=/work/h28/docs/results/session26/band32
TREE=/work/h28-base RATE=400mbit SPECS="allreduce:8192:131072 reduce_scatter:8192:131072 allgather:2048:32768" \
  REPORT="old=PYTHONPATH=/work/h28-base new=PYTHONPATH=/work/h28" \
  VARIANTS="old=PYTHONPATH=/work/h28-base new=PYTHONPATH=/work/h28" $B/run_micro.sh $B/ab-equal.txt $B/pieces.sh
echo ab done $(date -u +%T)
TREE=/work/h28-base SYS=nezha-all,mpi-all,mpi-rail0,mpi-all-ring,mpi-rail0-ring TAG=-rerun \
  EXTRA="--max-size 32K --reps 3 --reps-other 3 --time-budget 0.3" $M/run.sh equal unequal
echo queue4 done $(date -u +%T)
