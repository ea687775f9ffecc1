#!/bin/bash
# session 29 (h42): one compare run of allgather from TREE (cd into it: python -m puts the cwd
# first), under the exclusive timing lock; its lab named h42c, removed by the compare.
# usage: bash ab.sh TREE TAG RATES   e.g. bash ab.sh /work/h42-base unequal-A1 400mbit,100mbit
T=$1; TAG=$2; RATES=${3:-400mbit,100mbit}; D=$(dirname $(readlink -f $0)); PY=/work/main/.venv/bin/python
OUT=/tmp/h42/$TAG; SYS=${SYS:-nezha-all,mpi-all,mpi-rail0}
cd $T && export PYTHONPATH=$T NEZHA_LAB_NAME=h42c
cmd="$PY -m nezha bench compare --rates $RATES --collectives allgather --systems $SYS --min-size 1K --max-size 256K --reps 3 --reps-other 3 --time-budget 0.3 --out $OUT"
flock -x /tmp/nezha-quiet.lock bash -c "echo \"\$(date -u +%H:%M:%S) start $TAG $(git -C $T rev-parse --short HEAD) load \$(cut -d' ' -f1-3 /proc/loadavg): $cmd\" >> $D/times.txt; timeout 1400 $cmd > $OUT.log 2>&1; echo \"\$(date -u +%H:%M:%S) end $TAG rc \$?\" >> $D/times.txt"
mkdir -p $D/ab/$TAG; cp $OUT/compare.md $D/ab/$TAG/ 2>/dev/null; cp $OUT.log $D/ab/$TAG/run.log
$PY $D/cycles.py $OUT/compare.json > $D/ab/$TAG/cycles.txt 2>&1
