#!/bin/bash
# Issue 17 on today's tree (session 30, h49): the large sizes (512 KiB-64 MiB, 2 interleaved reps) against
# Open MPI's rows on 400+400 and 400+100, Gloo's bar below 1 MiB (4 B-512 KiB, 1 rep), and loopback.
# Each step takes the exclusive timing lock on its own; each compare builds and removes its lab.
# usage: run.sh [equal|unequal|gloo-equal|gloo-unequal|loopback]...   (default: all five)
#   EXTRA="--min-size 4M --max-size 4M" TAG=-rerun run.sh equal     (a rerun of some sizes)
PY=/work/main/.venv/bin/python; D=$(dirname $(readlink -f $0)); T=$(cd $D/../../../.. && pwd)
cd $T; export PYTHONPATH=$T
TMP=/tmp/h49; mkdir -p $TMP
MPI=nezha-all,mpi-all,mpi-all-ring,mpi-rail0,mpi-rail0-ring
COLL=${COLL:-allreduce,broadcast,allgather,reduce_scatter}
EXTRA=${EXTRA:-}
TAG=${TAG:-}
for step in ${@:-equal unequal gloo-equal gloo-unequal loopback}; do
  case $step in
    equal)   cmd="$PY -m nezha bench compare --rates 400mbit --collectives $COLL --systems $MPI --min-size 512K --max-size 64M --reps 2 --reps-other 2 --max-minutes 14 $EXTRA --out $TMP/$step$TAG" ;;
    unequal) cmd="$PY -m nezha bench compare --rates 400mbit,100mbit --collectives $COLL --systems $MPI,mpi-all-tuned --min-size 512K --max-size 64M --reps 2 --reps-other 2 --max-minutes 16 $EXTRA --out $TMP/$step$TAG" ;;
    gloo-equal)   cmd="$PY -m nezha bench compare --rates 400mbit --collectives $COLL --systems nezha-all,gloo-rail0,gloo-all --min-size 4 --max-size 512K --reps 1 --reps-other 1 $EXTRA --out $TMP/$step$TAG" ;;
    gloo-unequal) cmd="$PY -m nezha bench compare --rates 400mbit,100mbit --collectives $COLL --systems nezha-all,gloo-rail0,gloo-all --min-size 4 --max-size 512K --reps 1 --reps-other 1 $EXTRA --out $TMP/$step$TAG" ;;
    loopback) cmd="$PY bench/compare_loopback.py --backends nezha,mpi -np 4 -m 4:16M --reps 2 --time-budget 0.3 --max-minutes 8 $EXTRA --out $TMP/$step$TAG" ;;
  esac
  flock -x /tmp/nezha-quiet.lock bash -c "echo \"\$(date -u +%H:%M:%S) start $step$TAG load \$(cut -d' ' -f1-3 /proc/loadavg): $cmd\" >> $D/times.txt; $cmd > $TMP/$step$TAG.log 2>&1; echo \"\$(date -u +%H:%M:%S) end $step$TAG rc \$?\" >> $D/times.txt"
  mkdir -p $D/$step$TAG; cp $TMP/$step$TAG/*.md $D/$step$TAG/ 2>/dev/null; cp $TMP/$step$TAG.log $D/$step$TAG/run.log
  for j in $TMP/$step$TAG/*.json; do [ -f "$j" ] && gzip -c "$j" > $D/$step$TAG/$(basename $j).gz; done
done
