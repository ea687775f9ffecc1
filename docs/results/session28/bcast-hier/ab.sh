#!/bin/bash
# A B B A per layout (A = h40, B = main), nezha-all only, each tree from its own checkout.
# One flock -x hold per layout (short). usage: ab.sh LAYOUT...
set -u
A=/work/h40; B=/work/main; O=$(dirname "$(readlink -f "$0")"); PY=/work/main/.venv/bin/python
one() {  # tree tag layout
  local h=${3%x*} l=${3#*x}
  echo "$(date -u +%H:%M:%S) $2 $3 $(git -C "$1" rev-parse --short HEAD)" >> "$O/times.txt"
  (cd "$1" && PYTHONPATH="$1" timeout 300 $PY "$1/bench/ranks_per_host.py" --collective broadcast --hosts "$h" \
     --ranks-per-host "$l" --systems nezha-all --sizes 4K,8K,16K,64K,256K \
     --reps 1 --time-budget 1 --run-timeout 200 --out "$O/$3-$2.md" > "$O/$3-$2.log" 2>&1)
}
for lay in "$@"; do
  ( flock -x 9; one $A A1 $lay; one $B B1 $lay; one $B B2 $lay; one $A A2 $lay ) 9>/tmp/nezha-quiet.lock
done
