#!/bin/bash
# Session 27 (h33), issue 13: the INA window from rate x round trip, and the INA share judged
# by modelled time. A B B A: main (A) against this tree (B), 4 hosts x 1 rank, TCP on rail0,
# the INA service in rail1's switch. Run from anywhere under the quiet lock (<= 25 min):
#   flock -x /tmp/nezha-quiet.lock /work/h33/docs/results/session27/ina-window/lab.sh PART
# PART: equal (400 + INA 400, allreduce 4 B-64 MiB), slow (400 + INA 100, 1-4 MiB),
#       sweep (credit sweep of this tree's client at 400 Mbit/s and 1.6 Gbit/s)
OUT=/work/h33/docs/results/session27/ina-window
PY=/work/main/.venv/bin/python
A=/work/main; B=/work/h33
cd /work/h33 || exit 1
stamp() { echo "$(date -u +%H:%M:%S) $* load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/times.txt; }
run() {  # name tree rates min max reps budget
  local name=$1 tree=$2 rates=$3
  stamp "start $name ($tree, $rates)"
  PYTHONPATH=$tree timeout 900 $PY -m nezha bench compare --ina 1 --rates "$rates" \
    --collectives allreduce --systems nezha-ina --min-size $4 --max-size $5 --reps $6 \
    --time-budget $7 --max-minutes 8 --out $OUT/$name > $OUT/$name.log 2>&1
  stamp "end $name rc $?"
}
case "$1" in
equal)
  for x in A1:$A B1:$B B2:$B A2:$A; do
    run equal-${x%%:*} ${x#*:} 400mbit 4 64M 1 0.3
  done ;;
slow)
  for x in A1:$A B1:$B B2:$B A2:$A; do
    run slow-${x%%:*} ${x#*:} 400mbit,100mbit 1M 4M 3 1
  done ;;
slow64)  # as session 26's compare-400mbit-100mbit ran it: from 64 KiB (its 2 MiB split: 84 ms)
  for x in A1:$A B1:$B B2:$B A2:$A; do
    run slow64-${x%%:*} ${x#*:} 400mbit,100mbit 64K 4M 3 1
  done ;;
sweep)
  for r in 400mbit 1600mbit; do
    stamp "start sweep $r"
    PYTHONPATH=$B timeout 900 $PY bench/ina_credit_sweep.py --lab --hosts 4 --rate $r \
      --windows 1,2,3,4,5,6,8,12,16 --sizes 1M,16M --budget 32M \
      --json $OUT/credit_sweep_$r.json > $OUT/credit_sweep_$r.txt 2>&1
    stamp "end sweep $r rc $?"
  done ;;
loss)  # 1 % random loss on every host's INA link: the small default windows against 8
  stamp "start loss 1%"
  PYTHONPATH=$B timeout 900 $PY bench/ina_credit_sweep.py --lab --hosts 4 --rate 400mbit --loss 1 \
    --windows 3,4,5,8,16 --sizes 1M,16M --budget 32M \
    --json $OUT/loss1_400mbit.json > $OUT/loss1_400mbit.txt 2>&1
  stamp "end loss 1% rc $?" ;;
esac
