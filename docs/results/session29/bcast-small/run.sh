#!/bin/bash
# one compare step: TREE TAG RATES; broadcast 4 B - 16 KiB, nezha-all against Open MPI's rows,
# under the exclusive timing lock; output /tmp/h44/<TAG>, copied here with the log.
T=$1; TAG=$2; RATES=$3; D=$(dirname $(readlink -f $0)); PY=/work/main/.venv/bin/python
cd $T; export PYTHONPATH=$T NEZHA_LAB_NAME=h44c
cmd="$PY -m nezha bench compare --rates $RATES --collectives broadcast --systems nezha-all,mpi-all,mpi-rail0 --min-size 4 --max-size 64K --reps 1 --reps-other 3 --time-budget 0.3 --no-lab-check --out /tmp/h44/$TAG"
flock -x /tmp/nezha-quiet.lock bash -c "echo \"\$(date -u +%H:%M:%S) start $TAG $(git -C $T rev-parse --short HEAD) $(git -C $T status --short | wc -l) dirty: $cmd\" >> $D/times.txt; $cmd > /tmp/h44/$TAG.log 2>&1; echo \"\$(date -u +%H:%M:%S) end $TAG rc \$?\" >> $D/times.txt"
mkdir -p $D/runs/$TAG; cp /tmp/h44/$TAG/*.md $D/runs/$TAG/ 2>/dev/null; cp /tmp/h44/$TAG.log $D/runs/$TAG/run.log
