#!/bin/bash
# step.py in one lab (already up), from tree T, under the exclusive timing lock.
# usage: labstep.sh LAB TREE TAG VARIANTS SIZES ITERS ROUNDS [extra -x K=V ...]
D=$(dirname $(readlink -f $0)); PY=/work/main/.venv/bin/python
LAB=$1 T=$2 TAG=$3 V=$4 S=$5 I=$6 R=$7; shift 7
mkdir -p $D/runs
cd $T && flock -x /tmp/nezha-quiet.lock bash -c "echo \"\$(date -u +%T) start $TAG $(git -C $T rev-parse --short HEAD) $T\" >> $D/times.txt; NEZHA_LAB_NAME=$LAB timeout 240 $PY -m nezha lab run --timeout 220 --mca btl_tcp_if_include rail0 -x PYTHONPATH=$T -x NEZHA_SOCKET_IFNAME=rail0,rail1 $* -- $PY $D/step.py $V $S $I $R > $D/runs/$TAG.log 2>&1; echo \"\$(date -u +%T) end $TAG rc \$?\" >> $D/times.txt"
