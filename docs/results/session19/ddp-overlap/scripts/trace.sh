#!/bin/bash
# per-bucket timeline of DDP over nezha (tools/ddp_timeline.py), lab 4x1, 2 x 400 Mbit/s
# usage (under flock -x /tmp/nezha-quiet.lock): trace.sh TREE OUTNAME [extra env -x K=V ...]
source $(dirname $0)/lib.sh
T=$1; N=$2; shift 2
labup; trap labdown EXIT
# PRE: a command run in every host's namespace first (e.g. a sysctl), when set
if [ -n "$PRE" ]; then for h in 0 1 2 3; do $PY -m nezha lab exec --name $LAB $h -- $PRE >> $O/lab.log 2>&1; done; fi
# SAMPLE: machine CPU and ksoftirqd sampled every 5 ms during the run ($(dirname $0)/sampler.py)
[ -n "$SAMPLE" ] && { $PY $(dirname $0)/sampler.py /tmp/hc-tl/$N.stat 90 & }
intree $T $PY -m nezha lab run --name $LAB --env-rendezvous --timeout 300 -x OMP_NUM_THREADS=1 \
  -x NEZHA_SOCKET_IFNAME=rail0,rail1 "$@" -- \
  $PY tools/ddp_timeline.py /tmp/hc-tl/$N -- --backend nezha --model mlp --steps 6 --warmup 3 --batch 16 \
  > $O/trace-$N.txt 2>&1
$PY $T/tools/ddp_timeline.py --summary /tmp/hc-tl/$N >> $O/trace-$N.txt
