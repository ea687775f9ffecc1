#!/bin/bash
# session 29 (h42): the split change's effect on allreduce (400 + 100), one compare run from TREE
# usage: bash ab_allreduce.sh TREE TAG
T=$1; TAG=$2; D=$(dirname $(readlink -f $0)); PY=/work/main/.venv/bin/python; OUT=/tmp/h42/$TAG
cd $T && export PYTHONPATH=$T NEZHA_LAB_NAME=h42c
cmd="$PY -m nezha bench compare --rates 400mbit,100mbit --collectives allreduce --systems nezha-all,mpi-all,mpi-rail0 --min-size 2K --max-size 256K --reps 2 --time-budget 0.3 --out $OUT"
flock -x /tmp/nezha-quiet.lock bash -c "echo \"\$(date -u +%H:%M:%S) start $TAG $(git -C $T rev-parse --short HEAD) load \$(cut -d' ' -f1-3 /proc/loadavg): $cmd\" >> $D/times.txt; timeout 1400 $cmd > $OUT.log 2>&1; echo \"\$(date -u +%H:%M:%S) end $TAG rc \$?\" >> $D/times.txt"
mkdir -p $D/ab/$TAG; cp $OUT/compare.md $D/ab/$TAG/ 2>/dev/null; cp $OUT.log $D/ab/$TAG/run.log
