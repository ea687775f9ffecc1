#!/bin/bash
# issue 15 (session 26, h30): does the slow first job follow the TCP metrics cache?
# Run as: flock -x /tmp/nezha-quiet.lock bash run1.sh TAG   (ROUNDS rounds, fresh lab each)
# Per round, invocations of bench/first_collective.py --reps 3 in one lab:
#   D1 fresh lab (job 0 with an empty metrics cache), D2 same lab (cache filled),
#   F --flush-metrics (every job starts with an empty cache),
#   N tcp_no_metrics_save=1 in every host namespace (cache flushed first, nothing saved),
#   G --gap 3 (3 s idle before every job: about a new driver's start)
PY=/work/main/.venv/bin/python; T=/work/h30; O=$T/docs/results/session26/first-job; L=/tmp/h30/fj
mkdir -p $O/raw $L
lab() { (cd $T && PYTHONPATH=$T timeout 60 $PY -m nezha lab "$@" > /dev/null); }
fc() { tag=$1; shift; echo "$(date -u +%T) $tag load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  (cd $T && PYTHONPATH=$T timeout 400 $PY bench/first_collective.py --lab h30a --modes auto \
    --cpustat --metrics --phases --json $L/$tag.json --log $L/$tag.log "$@") > $O/raw/$tag.txt 2>&1; }
nms() { for h in 0 1 2 3; do ip netns exec h30ah$h sysctl -qw net.ipv4.tcp_no_metrics_save=$1
  ip -n h30ah$h tcp_metrics flush all; done; }
for r in $(seq 1 ${ROUNDS:-3}); do
  lab up --name h30a --hosts 4 --rails 2 --rate 400mbit,100mbit --replace || exit 1
  fc $1-$r-D1 --reps 3
  fc $1-$r-D2 --reps 3
  fc $1-$r-F --reps 3 --flush-metrics
  nms 1; fc $1-$r-N --reps 3; nms 0
  fc $1-$r-G --reps 3 --gap 3
done
lab down --name h30a
