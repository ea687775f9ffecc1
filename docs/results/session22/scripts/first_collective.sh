#!/bin/bash
# issue 15: the first 16 MiB allreduce on 400 + 100 after start, before (a2b773c, worktree
# /work/b22) vs after (main: in-place runs out of place), one lab, jobs alternated ABBA.
# usage: first_collective.sh 1 (19:06: before first after lab up) | 2 (19:12: after first)
source /work/main/docs/results/session22/scripts/lib.sh; lock
O=/work/main/docs/results/session22/first-collective; mkdir -p $O /tmp/m22
$PY -m nezha lab up --name nzfc --hosts 4 --rails 2 --rate 400mbit,100mbit --replace > /dev/null
fc() { echo "$(date -u +%H:%M:%S) $1 $2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  intree $1 $PY bench/first_collective.py --lab nzfc --reps 2 --modes auto --phases \
    --log $O/$2.log --json /tmp/m22/fc-$2.json > $O/$2.txt 2>&1; }
if [ "$1" = 1 ]; then
  fc b22 before-1; fc main after-1; fc main after-2; fc b22 before-2
  fc b22 before-3; fc main after-3; fc main after-4; fc b22 before-4
else
  fc main after-5; fc b22 before-5; fc b22 before-6; fc main after-6
  fc main after-7; fc b22 before-7; fc b22 before-8; fc main after-8
fi
$PY -m nezha lab down --name nzfc > /dev/null
