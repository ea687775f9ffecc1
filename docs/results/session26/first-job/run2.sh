#!/bin/bash
# issue 15 (session 26, h30): the slow first job follows idle time before the job (run1's G).
# Before every job: g0 no gap; g3 3 s idle; g3busy 3 s with both CPUs kept busy (--gap-busy);
# g3pf 3 s idle, then every rank touches and frees 512 MiB right before its timed calls
# (--prefault-mb 512). ABCD DCBA per round, one invocation of --reps 3 each, one lab.
# Run as: flock -x /tmp/nezha-quiet.lock bash run2.sh TAG
PY=/work/main/.venv/bin/python; T=/work/h30; O=$T/docs/results/session26/first-job; L=/tmp/h30/fj
mkdir -p $O/raw $L
lab() { (cd $T && PYTHONPATH=$T timeout 60 $PY -m nezha lab "$@" > /dev/null); }
fc() { tag=$1; shift; echo "$(date -u +%T) $tag load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  (cd $T && PYTHONPATH=$T timeout 400 $PY bench/first_collective.py --lab h30a --modes auto \
    --cpustat --phases --json $L/$tag.json --log $L/$tag.log "$@") > $O/raw/$tag.txt 2>&1; }
declare -A A=([g3]="--gap 3" [g3busy]="--gap 3 --gap-busy" [g0]="" [g3pf]="--gap 3 --prefault-mb 512")
lab up --name h30a --hosts 4 --rails 2 --rate 400mbit,100mbit --replace || exit 1
for r in $(seq 1 ${ROUNDS:-2}); do
  for c in g3 g3busy g3pf g0 g0 g3pf g3busy g3; do
    n=1; while [ -e $L/$1-$r-$n-$c.json ]; do n=$((n+1)); done
    fc $1-$r-$n-$c --reps ${REPS:-3} ${A[$c]}
  done
done
lab down --name h30a
# the page-touch micro (no lab): first touch of fresh memory after a free and an idle gap
[ -n "$NOMICRO" ] || $PY $O/memtouch.py > $O/memtouch.txt 2>&1
