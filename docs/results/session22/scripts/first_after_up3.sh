#!/bin/bash
# issue 15: why the first job after `lab up` is ~5 % slow: per fresh lab, job 1, job 2, then
# TCP's per-destination metrics flushed in every lab namespace, job 3 (main)
source /work/main/docs/results/session22/scripts/lib.sh; lock
O=/work/main/docs/results/session22/first-after-up; mkdir -p $O /tmp/m22
run() { echo "$(date -u +%H:%M:%S) $1 load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  intree main $PY bench/first_collective.py --lab nzfc --reps 1 --modes auto \
    --json /tmp/m22/fm-$1.json > $O/$1.txt 2>&1; }
for i in 1 2 3; do
  $PY -m nezha lab up --name nzfc --hosts 4 --rails 2 --rate 400mbit,100mbit --replace > /dev/null
  run up$i-job1; run up$i-job2
  for ns in $(ip netns list | awk '/^nzfc/ {print $1}'); do ip -n $ns tcp_metrics flush all 2>/dev/null; done
  run up$i-job3-flushed
  $PY -m nezha lab down --name nzfc > /dev/null
done
