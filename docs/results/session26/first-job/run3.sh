#!/bin/bash
# issue 15 (session 26, h30): socket buffers against the fresh-memory cost of a job's first
# calls. Every job after 3 s idle (--gap 3: the VM has reported the freed memory to the host);
# NEZHA_SOCKET_BUFFER 4M (default) / 1M / 256K; ABC CBA per round, --reps 3 each, one lab.
# Run as: flock -x /tmp/nezha-quiet.lock bash run3.sh TAG
PY=/work/main/.venv/bin/python; T=${TREE:-/work/h30}; O=/work/h30/docs/results/session26/first-job; L=/tmp/h30/fj
mkdir -p $O/raw $L
lab() { (cd $T && PYTHONPATH=$T timeout 60 $PY -m nezha lab "$@" > /dev/null); }
fc() { tag=$1; shift; echo "$(date -u +%T) $tag load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  (cd $T && PYTHONPATH=$T timeout 400 $PY /work/h30/bench/first_collective.py --lab h30a --modes auto \
    --cpustat --phases --json $L/$tag.json --log $L/$tag.log "$@") > $O/raw/$tag.txt 2>&1; }
declare -A A=([sb4m]="-x NEZHA_SOCKET_BUFFER=4M" [sb1m]="-x NEZHA_SOCKET_BUFFER=1M" [sb256k]="-x NEZHA_SOCKET_BUFFER=256K")
lab up --name h30a --hosts 4 --rails 2 --rate 400mbit,100mbit --replace || exit 1
for r in $(seq 1 ${ROUNDS:-2}); do
  for c in sb4m sb1m sb256k sb256k sb1m sb4m; do
    n=1; while [ -e $L/$1-$r-$n-$c.json ]; do n=$((n+1)); done
    fc $1-$r-$n-$c --reps ${REPS:-3} --gap 3 ${A[$c]}
  done
done
lab down --name h30a
