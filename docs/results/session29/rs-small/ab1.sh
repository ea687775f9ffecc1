#!/bin/bash
# A: main's code as is; R1: NEZHA_MAX_RAILS=1 (every size on one rail); RING: NEZHA_ALGO=ring
N=/work/main/.venv/bin/python
C="-m nezha bench compare --rates 400mbit --collectives reduce_scatter --systems nezha-all,mpi-rail0,mpi-all --min-size 1K --max-size 64K --reps 3 --reps-other 3 --time-budget 0.3 --no-lab-check"
cd /work/h45
for v in A1 R1a RINGa R1b A2; do
  case $v in
    A*) env -u NEZHA_MAX_RAILS timeout 400 $N $C --out /tmp/h45/$v ;;
    R1*) NEZHA_MAX_RAILS=1 timeout 400 $N $C --out /tmp/h45/$v ;;
    RING*) NEZHA_ALGO=ring timeout 400 $N $C --out /tmp/h45/$v ;;
  esac
  date -u
done
