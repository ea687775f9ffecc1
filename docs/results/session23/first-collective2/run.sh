#!/bin/bash
# issue 15 (session 23): the first 16 MiB allreduce on 400 + 100 after start, fresh jobs,
# three trees alternated in one lab: base (ce2d3e6, main), spare (bcc53df: huge-page spares
# only), after (hB: + the hedged prior). Run as: flock -x /tmp/nezha-quiet.lock bash run.sh TAG
# (TAG names the round; 2 jobs per invocation, ABC CBA x ROUNDS)
PY=/work/main/.venv/bin/python
O=/work/hB/docs/results/session23/first-collective2; L=/tmp/hB/fc; mkdir -p $O $L
declare -A T=([base]=/work/hB-base [spare]=/work/hB-spare [after]=/work/hB)
(cd /work/hB && PYTHONPATH=/work/hB $PY -m nezha lab up --name nzhb --hosts 4 --rails 2 \
  --rate 400mbit,100mbit --replace > /dev/null) || { echo "lab up failed"; exit 1; }
fc() { echo "$(date -u +%H:%M:%S) $1 $2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  (cd ${T[$1]} && PYTHONPATH=${T[$1]} timeout 300 $PY bench/first_collective.py \
    --lab nzhb --reps 2 --modes auto --phases --log $L/$2.log --json $L/$2.json) \
    > $O/$2.txt 2>&1; }
for r in $(seq 1 ${ROUNDS:-3}); do
  fc base $1-$r-base-a; fc spare $1-$r-spare-a; fc after $1-$r-after-a
  fc after $1-$r-after-b; fc spare $1-$r-spare-b; fc base $1-$r-base-b
done
(cd /work/hB && PYTHONPATH=/work/hB $PY -m nezha lab down --name nzhb > /dev/null)
