#!/bin/bash
# session 28 (h39): every candidate of the model forced, in one compare run on 400 + 100 (or
# RATES), allreduce and allgather 2-32 KiB, next to nezha's own choice and Open MPI's rows.
# Run from inside the tree (python -m puts the cwd first); the compare builds and removes its
# lab (NEZHA_LAB_NAME=h39); the whole run under the exclusive timing lock.
# usage: TAG=-1 [RATES=400mbit,100mbit] bash diag.sh
D=$(dirname $(readlink -f $0)); T=$(cd $D/../../../.. && pwd); PY=/work/main/.venv/bin/python
RATES=${RATES:-400mbit,100mbit}; TAG=${TAG:-}; OUT=/tmp/h39/diag$TAG; mkdir -p /tmp/h39
SYS=${SYS:-nezha-all,nezha-rail0,nezha-all-rd,nezha-all-rab1,nezha-all-rab2,nezha-all-1r,nezha-all-2r,mpi-rail0}
cd $T && export PYTHONPATH=$T NEZHA_LAB_NAME=h39
cmd="$PY -m nezha bench compare --rates $RATES --collectives allreduce,allgather --systems $SYS --min-size 2K --max-size 32K --reps 3 --reps-other 3 --time-budget 0.3 --out $OUT"
flock -x /tmp/nezha-quiet.lock bash -c "echo \"\$(date -u +%H:%M:%S) start diag$TAG $(git -C $T rev-parse --short HEAD) load \$(cut -d' ' -f1-3 /proc/loadavg): $cmd\" >> $D/times.txt; timeout 1200 $cmd > $OUT.log 2>&1; echo \"\$(date -u +%H:%M:%S) end diag$TAG rc \$?\" >> $D/times.txt"
mkdir -p $D/diag$TAG; cp $OUT/compare.md $D/diag$TAG/ 2>/dev/null; cp $OUT.log $D/diag$TAG/run.log
