#!/bin/bash
# One exclusive hold (takes the lock itself): step.py on both labs from B (/work/h54) and A
# (/work/h54-base, main), then A B B A of the brief's bench compare on both rate pairs.
# usage: [RUNS="A1 B1 B2 A2"] [CMP_EXTRA="--reps-other 2 "] hold.sh [step|compare|all]
D=$(dirname $(readlink -f $0)); PY=/work/main/.venv/bin/python; mkdir -p $D/runs /tmp/h54/cmp
WHAT=${1:-all}
exec 9>/tmp/nezha-quiet.lock; flock -x 9
log() { echo "$(date -u +%T) $*" >> $D/times.txt; }
if [ $WHAT = step ] || [ $WHAT = all ]; then
  for lab in h54e:equal h54u:unequal; do
    for t in h54:B h54-base:A h54:B-spin0; do
      L=${lab%%:*}; T=/work/${t%%:*}; K=${t##*:}; TAG=step-${lab##*:}-$K; X=
      V=nz-bcast,mpi-bcast,nz-rs,mpi-rs
      [ $K = B ] && V=$V,nz-bcast-tr
      [ $K = B-spin0 ] && { V=nz-bcast,mpi-bcast,nz-bcast-tr; X="-x NEZHA_SPIN_US=0"; }
      log "start $TAG $(git -C $T rev-parse --short HEAD) $T $X"
      (cd $T && NEZHA_LAB_NAME=$L timeout 200 $PY -m nezha lab run --timeout 180 --mca btl_tcp_if_include rail0 \
        -x PYTHONPATH=$T -x NEZHA_SOCKET_IFNAME=rail0,rail1 $X -- $PY $D/step.py $V 4,16,1024,2048 300 6 > $D/runs/$TAG.log 2>&1)
      log "end $TAG rc $?"
    done
  done
fi
if [ $WHAT = compare ] || [ $WHAT = all ]; then
  for rates in 400mbit 400mbit,100mbit; do
    for run in ${RUNS:-A1 B1 B2 A2}; do
      case $run in A*) T=/work/h54-base;; *) T=/work/h54;; esac; TAG=${rates//,/-}-$run
      cmd="$PY -m nezha bench compare --rates $rates --collectives broadcast,reduce_scatter --systems nezha-all,mpi-all,mpi-rail0 --min-size 4 --max-size 8K --reps 3 ${CMP_EXTRA:-}--out /tmp/h54/cmp/$TAG"
      log "start $TAG $(git -C $T rev-parse --short HEAD) $T: $cmd"
      (cd $T && PYTHONPATH=$T timeout 400 $cmd > /tmp/h54/cmp/$TAG.log 2>&1)
      log "end $TAG rc $?"
      mkdir -p $D/runs/$TAG; cp /tmp/h54/cmp/$TAG/compare.md /tmp/h54/cmp/$TAG.log $D/runs/$TAG/ 2>/dev/null
      gzip -c /tmp/h54/cmp/$TAG/compare.json > $D/runs/$TAG/compare.json.gz 2>/dev/null
    done
  done
fi
