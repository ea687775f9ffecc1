#!/bin/bash
# issue 17's whole matrix on one tree: compare on equal and on 400+100 rails, then loopback.
# Each step takes the exclusive timing lock on its own; the compare builds and removes its lab.
# usage: run.sh [equal|unequal|loopback]...   (default: all three)
# TREE: the tree to run (default: this worktree); outputs in /tmp/h28/<step><TAG>, the tables
# and times.txt in OUTDIR (default: this script's folder)
PY=/work/main/.venv/bin/python; D=$(dirname $(readlink -f $0)); T=${TREE:-$(cd $D/../../../.. && pwd)}
O=${OUTDIR:-$D}; cd $T; export PYTHONPATH=$T NEZHA_LAB_NAME=${LABNAME:-h28}; mkdir -p /tmp/h28
SYS=${SYS:-nezha-all,nezha-rail0,mpi-all,mpi-rail0,mpi-all-ring,mpi-rail0-ring,gloo-rail0,gloo-all}
COLL=${COLL:-allreduce,broadcast,allgather,reduce_scatter}
EXTRA=${EXTRA:-}      # e.g. "--min-size 8K --max-size 64K" for reruns
TAG=${TAG:-}
for step in ${@:-equal unequal loopback}; do
  case $step in
    equal)   cmd="$PY -m nezha bench compare --rates 400mbit --collectives $COLL --systems $SYS --max-size 64M --reps 1 --reps-other 1 $EXTRA --out /tmp/h28/equal$TAG" ;;
    unequal) cmd="$PY -m nezha bench compare --rates 400mbit,100mbit --collectives $COLL --systems $SYS,mpi-all-tuned --max-size 64M --reps 1 --reps-other 1 $EXTRA --out /tmp/h28/unequal$TAG" ;;
    loopback) cmd="$PY bench/compare_loopback.py --backends nezha,mpi --reps 2 --time-budget 0.3 --max-minutes 8 $EXTRA --out /tmp/h28/loopback$TAG" ;;
  esac
  flock -x /tmp/nezha-quiet.lock bash -c "echo \"\$(date -u +%H:%M:%S) start $step$TAG $(git -C $T rev-parse --short HEAD) load \$(cut -d' ' -f1-3 /proc/loadavg): $cmd\" >> $O/times.txt; $cmd > /tmp/h28/$step$TAG.log 2>&1; echo \"\$(date -u +%H:%M:%S) end $step$TAG rc \$?\" >> $O/times.txt"
  mkdir -p $O/$step$TAG; cp /tmp/h28/$step$TAG/*.md $O/$step$TAG/ 2>/dev/null; cp /tmp/h28/$step$TAG.log $O/$step$TAG/run.log
done
