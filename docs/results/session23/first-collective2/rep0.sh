#!/bin/bash
# Is the slow first job of a bench invocation (rep 0) about the driver's start? after tree
# (hB) only: A = one invocation of --reps 4, B = four invocations of --reps 1, A B A B;
# --netstat: every rank's TCP loss counters for calls 1, 2, 3 (NET lines in the log).
# flock -x /tmp/nezha-quiet.lock bash rep0.sh
PY=/work/main/.venv/bin/python
O=/work/hB/docs/results/session23/first-collective2/rep0; L=/tmp/hB/rep0; mkdir -p $O $L
(cd /work/hB && PYTHONPATH=/work/hB $PY -m nezha lab up --name nzhb --hosts 4 --rails 2 \
  --rate 400mbit,100mbit --replace > /dev/null) || { echo "lab up failed"; exit 1; }
fc() { echo "$(date -u +%H:%M:%S.%N | cut -c1-12) $1 reps $2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  (cd /work/hB && PYTHONPATH=/work/hB timeout 300 $PY bench/first_collective.py --lab nzhb \
    --reps $2 --modes auto --phases --netstat --log $L/$1.log --json $L/$1.json) > $O/$1.txt 2>&1; }
for i in 1 2; do
  fc A$i 4; for j in 1 2 3 4; do fc B$i-$j 1; done
done
(cd /work/hB && PYTHONPATH=/work/hB $PY -m nezha lab down --name nzhb > /dev/null)
