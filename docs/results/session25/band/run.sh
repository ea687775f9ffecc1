#!/bin/bash
# issue 17's <= 128 KiB band (allreduce, allgather, reduce_scatter; broadcast left out) on one
# tree, equal and 400+100 rails, under the exclusive timing lock; the compare builds and removes
# its lab. usage: TREE=/work/h24 TAG=-main run.sh [equal|unequal]...
PY=/work/main/.venv/bin/python; D=$(dirname $(readlink -f $0)); T=${TREE:-$(cd $D/../../../.. && pwd)}
cd $T; export PYTHONPATH=$T NEZHA_LAB_NAME=h24
SYS=nezha-all,nezha-rail0,mpi-all,mpi-rail0,mpi-all-ring,mpi-rail0-ring
COLL=allreduce,allgather,reduce_scatter
EXTRA=${EXTRA:-}
TAG=${TAG:-}
mkdir -p /tmp/h24
for step in ${@:-equal unequal}; do
  case $step in
    equal)   cmd="$PY -m nezha bench compare --rates 400mbit --collectives $COLL --systems $SYS --max-size 128K --reps 1 --reps-other 1 $EXTRA --out /tmp/h24/equal$TAG" ;;
    unequal) cmd="$PY -m nezha bench compare --rates 400mbit,100mbit --collectives $COLL --systems $SYS,mpi-all-tuned --max-size 128K --reps 1 --reps-other 1 $EXTRA --out /tmp/h24/unequal$TAG" ;;
  esac
  L="flock -x /tmp/nezha-quiet.lock"; [ -n "$FLOCKED" ] && L=""   # the caller holds it
  $L bash -c "echo \"\$(date -u +%H:%M:%S) start $step$TAG tree $T \$(git -C $T rev-parse --short HEAD) load \$(cut -d' ' -f1-3 /proc/loadavg): $cmd\" >> $D/times.txt; $cmd > /tmp/h24/$step$TAG.log 2>&1; echo \"\$(date -u +%H:%M:%S) end $step$TAG rc \$?\" >> $D/times.txt"
done
