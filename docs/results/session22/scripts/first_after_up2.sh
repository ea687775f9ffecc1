#!/bin/bash
# issue 15: the first job after `lab up`: main (spare faulted by the run) vs /work/t22 (the
# spare's pages populated by a thread of their own, buffers.populate_async), a fresh lab
# for every job, alternated ABBA
source /work/main/docs/results/session22/scripts/lib.sh; lock
O=/work/main/docs/results/session22/first-after-up; mkdir -p $O /tmp/m22
job() { $PY -m nezha lab up --name nzfc --hosts 4 --rails 2 --rate 400mbit,100mbit --replace > /dev/null
  echo "$(date -u +%H:%M:%S) $1 $2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  intree $1 $PY bench/first_collective.py --lab nzfc --reps 1 --modes auto --phases \
    --log $O/$2.log --json /tmp/m22/fu-$2.json > $O/$2.txt 2>&1
  $PY -m nezha lab down --name nzfc > /dev/null; }
for i in 1 2 3 4; do job main main-$i; job t22 pop-$i; job t22 pop-$i-b; job main main-$i-b; done
