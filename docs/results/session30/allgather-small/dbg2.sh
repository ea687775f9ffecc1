#!/bin/bash
# h46 (B) only, 3 reps: which plan bench compare's nezha-all runs at 256 B-1 KiB a rank, PLAN and TOPO logged per rank
N=/work/main/.venv/bin/python
C="-m nezha bench compare --rates 400mbit --collectives allgather --systems nezha-all,mpi-rail0 --min-size 256 --max-size 4K --reps 3 --reps-other 3 --time-budget 0.3 --no-lab-check"
T=/work/h46
cd $T && PYTHONPATH=$T NEZHA_LAB_NAME=h46c NEZHA_DEBUG=INFO NEZHA_DEBUG_SUBSYS=PLAN,TOPO NEZHA_DEBUG_FILE=/tmp/h46/dbg2-%h-%p.log timeout 300 $N $C --out /tmp/h46/dbg2B
date -u
