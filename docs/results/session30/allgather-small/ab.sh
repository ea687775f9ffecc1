#!/bin/bash
# A B B A in one lock: A = main (/work/h46-base), B = h46 (rd allgather's rails by the measured step cost)
N=/work/main/.venv/bin/python
C="-m nezha bench compare --rates 400mbit --collectives allgather,allreduce --systems nezha-all,mpi-all,mpi-rail0 --min-size 256 --max-size 16K --reps 3 --reps-other 3 --time-budget 0.3 --no-lab-check"
for v in ${ORDER:-A1 B1 B2 A2}; do
  case $v in
    A*) cd /work/h46-base && PYTHONPATH=/work/h46-base NEZHA_LAB_NAME=h46c timeout 500 $N $C --out /tmp/h46/$v ;;
    B*) cd /work/h46 && PYTHONPATH=/work/h46 NEZHA_LAB_NAME=h46c timeout 500 $N $C --out /tmp/h46/$v ;;
  esac
  date -u
done
