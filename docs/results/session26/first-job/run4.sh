#!/bin/bash
# issue 15 (session 26, h30): page faults per call (rank 0's minor faults, the machine's THP
# faults and page faults) in jobs after 3 s idle (g3) and back to back (g0); ABBA, --reps 2.
# Run as: flock -x /tmp/nezha-quiet.lock bash run4.sh TAG
PY=/work/main/.venv/bin/python; T=/work/h30; O=$T/docs/results/session26/first-job; L=/tmp/h30/fj
lab() { (cd $T && PYTHONPATH=$T timeout 60 $PY -m nezha lab "$@" > /dev/null); }
fc() { tag=$1; shift; echo "$(date -u +%T) $tag load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  (cd $T && PYTHONPATH=$T timeout 400 $PY bench/first_collective.py --lab h30a --modes auto \
    --cpustat --phases --json $L/$tag.json --log $L/$tag.log "$@") > $O/raw/$tag.txt 2>&1; }
lab up --name h30a --hosts 4 --rails 2 --rate 400mbit,100mbit --replace || exit 1
fc $1-1-g3 --reps 2 --gap 3; fc $1-1-g0 --reps 2; fc $1-2-g0 --reps 2; fc $1-2-g3 --reps 2 --gap 3
lab down --name h30a
