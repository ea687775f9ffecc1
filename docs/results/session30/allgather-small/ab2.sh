#!/bin/bash
# A B B A in one lock, allgather only: A = main (/work/h46-base), B = h46 (one rail within the first sample); PLAN/TOPO logged per rank
N=/work/main/.venv/bin/python
C="-m nezha bench compare --rates 400mbit --collectives allgather --systems nezha-all,mpi-all,mpi-rail0 --min-size 256 --max-size 8K --reps 3 --reps-other 3 --time-budget 0.3 --no-lab-check"
for v in A3 B3 B4 A4; do
  case $v in A*) T=/work/h46-base ;; B*) T=/work/h46 ;; esac
  cd $T && PYTHONPATH=$T NEZHA_LAB_NAME=h46c NEZHA_DEBUG=INFO NEZHA_DEBUG_SUBSYS=PLAN,TOPO NEZHA_DEBUG_FILE=/tmp/h46/log-$v-%h-%p.log timeout 300 $N $C --out /tmp/h46/$v
  date -u
done
