#!/bin/bash
# issue 15: the first job after `lab up` (main, out of place): plain vs --prefault (the bench
# touches and frees two payload-sized blocks first), a fresh lab for every job, alternated
source /work/main/docs/results/session22/scripts/lib.sh; lock
O=/work/main/docs/results/session22/first-after-up; mkdir -p $O /tmp/m22
job() { $PY -m nezha lab up --name nzfc --hosts 4 --rails 2 --rate 400mbit,100mbit --replace > /dev/null
  echo "$(date -u +%H:%M:%S) $1 load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  intree main $PY bench/first_collective.py --lab nzfc --reps 1 --modes auto --phases $2 \
    --log $O/$1.log --json /tmp/m22/fu-$1.json > $O/$1.txt 2>&1
  $PY -m nezha lab down --name nzfc > /dev/null; }
for i in 1 2 3; do job plain-$i ""; job prefault-$i --prefault; done
