#!/bin/bash
# Broadcast with several ranks per host, before and after session 28's repricing (h35: the
# byte cost now prices broadcast's steps at 2 x 4 and 4 x 2 too; its bench had no broadcast).
# A B B A per layout, each tree run from its own checkout (cd into it: `python` puts the
# script's directory and the current one ahead of PYTHONPATH). usage: run.sh AFTER BEFORE
set -u
A=$(realpath "$1"); B=$(realpath "$2"); O=$(dirname "$(readlink -f "$0")")
PY=/work/main/.venv/bin/python
exec 9>/tmp/nezha-quiet.lock; flock -x 9
one() {  # tree tag layout(HxL)
  local h=${3%x*} l=${3#*x}
  echo "$(date -u +%H:%M:%S) $2 $3 $(git -C "$1" rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$O/times.txt"
  (cd "$1" && PYTHONPATH="$1" $PY bench/ranks_per_host.py --collective broadcast --hosts "$h" \
     --ranks-per-host "$l" --systems nezha-all,mpi-best-default --sizes 4,1K,4K,16K,64K,256K,1M \
     --reps 1 --time-budget 1 --run-timeout 300 --out "$O/$3-$2.md" > "$O/$3-$2.log" 2>&1)
}
for lay in 2x4 4x2; do
  one "$A" A1 $lay; one "$B" B1 $lay; one "$B" B2 $lay; one "$A" A2 $lay
done
echo "$(date -u +%H:%M:%S) end" >> "$O/times.txt"
