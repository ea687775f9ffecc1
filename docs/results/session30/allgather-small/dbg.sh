#!/bin/bash
# which plan bench compare's nezha-all runs at 1 KiB a rank: main (A) then h46 (B), PLAN logged to files
N=/work/main/.venv/bin/python
C="-m nezha bench compare --rates 400mbit --collectives allgather --systems nezha-all,mpi-rail0 --min-size 512 --max-size 2K --reps 1 --reps-other 1 --time-budget 0.3 --no-lab-check"
for v in A B; do
  case $v in A) T=/work/h46-base ;; B) T=/work/h46 ;; esac
  cd $T && PYTHONPATH=$T NEZHA_LAB_NAME=h46c NEZHA_DEBUG=INFO NEZHA_DEBUG_SUBSYS=PLAN,TOPO NEZHA_DEBUG_FILE=/tmp/h46/dbg-$v-%h-%p.log timeout 300 $N $C --out /tmp/h46/dbg$v
  date -u
done
