#!/bin/bash
# bd.sh TREE OUTDIR HOSTS RPH [extra -x K=V...]: breakdown.py in a fresh lab named h34bd
# (2 rails of 400mbit), under the exclusive timing lock
T=$1; O=$2; H=$3; L=$4; shift 4
PY=/work/main/.venv/bin/python
D=$(dirname $(readlink -f $0))
export PYTHONPATH=$T
rm -rf $O; mkdir -p $O
$PY -m nezha lab up --name h34bd --hosts $H --rails 2 --ranks-per-host $L --rate 400mbit --replace >/dev/null
timeout 300 $PY -m nezha lab run --name h34bd --timeout 280 -x BD_OUT=$O "$@" -- $PY $D/breakdown.py > $O/log 2>&1
echo rc=$?
$PY -m nezha lab down --name h34bd >/dev/null
