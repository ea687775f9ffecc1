#!/bin/bash
# A B B A: A = main (/work/h45-base), B = h45 (rd reduce_scatter's rails by the measured step cost)
N=/work/main/.venv/bin/python
C="-m nezha bench compare --rates 400mbit --collectives reduce_scatter --systems nezha-all,mpi-rail0,mpi-all --min-size 1K --max-size 64K --reps 3 --reps-other 3 --time-budget 0.3 --no-lab-check"
for v in A3 B1 B2 A4; do
  case $v in
    A*) cd /work/h45-base && PYTHONPATH=/work/h45-base timeout 400 $N $C --out /tmp/h45/$v ;;
    B*) cd /work/h45 && PYTHONPATH=/work/h45 timeout 400 $N $C --out /tmp/h45/$v ;;
  esac
  date -u
done
