#!/bin/bash
# The lab runs this model is checked against: nezha-ina (TCP on rail0 + the INA rail on
# rail1) and nezha on rail0 alone, allreduce 64 KiB-64 MiB, 4 hosts x 1 rank, REPS (3) runs each, BUDGET (1) s per size
# (first/: the same with --reps 2 and the default 0.05 s budget).
# Run from the worktree root under the quiet lock (each compare ~2-4 min):
#   flock -x /tmp/nezha-quiet.lock docs/results/session26/ina-sim/lab.sh
cd "$(dirname "$0")/../../../.." || exit 1
OUT=docs/results/session26/ina-sim
PY=/work/main/.venv/bin/python
export PYTHONPATH=$PWD
for rates in 400mbit 400mbit,100mbit 100mbit,400mbit; do
  name=compare-${rates/,/-}
  timeout 1200 $PY -m nezha bench compare --ina 1 --rates "$rates" --collectives allreduce \
      --systems nezha-ina,nezha-rail0 --min-size 64K --max-size 64M --reps ${REPS:-3} --time-budget ${BUDGET:-1} --max-minutes 8 \
      --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  echo "$rates rc $?"
done
