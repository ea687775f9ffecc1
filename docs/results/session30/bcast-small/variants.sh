#!/bin/bash
# every tree choice in one job against Open MPI (variants.py), on lab h47 (already up at the
# rates given, 4 hosts x 1 rank); one flock -x hold. usage: variants.sh TAG [SIZES ITERS ROUNDS]
D=$(dirname $(readlink -f $0)); PY=/work/main/.venv/bin/python; T=/work/h47
mkdir -p $D/runs
cd $T && NEZHA_LAB_NAME=h47 flock -x /tmp/nezha-quiet.lock bash -c "echo \"\$(date -u +%H:%M:%S) start variants-$1 $(git -C $T rev-parse --short HEAD)\" >> $D/times.txt; timeout 300 $PY -m nezha lab run --timeout 280 --mca btl_tcp_if_include rail0 -x PYTHONPATH=$T -x NEZHA_SOCKET_IFNAME=rail0,rail1 -- $PY $D/variants.py ${2:-512,1024,2048,4096} ${3:-300} ${4:-4} > $D/runs/variants-$1.log 2>&1; echo \"\$(date -u +%H:%M:%S) end variants-$1 rc \$?\" >> $D/times.txt"
