#!/bin/bash
# Lazy hierarchical broadcast (session 29, h41) against main: A B B A per layout, one
# exclusive hold per layout, each tree run from its own checkout (cd into it: `python` puts
# the script's directory and the current one ahead of PYTHONPATH). usage: run.sh AFTER BEFORE [TAG]
set -u
A=$(realpath "$1"); B=$(realpath "$2"); T=${3:-}; O=$(dirname "$(readlink -f "$0")")
PY=/work/main/.venv/bin/python
one() {  # tree tag layout(HxL)
  local h=${3%x*} l=${3#*x}
  echo "$(date -u +%H:%M:%S) $2 $3 $(git -C "$1" rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$O/times.txt"
  (cd "$1" && PYTHONPATH="$1" timeout 600 $PY bench/ranks_per_host.py --collective broadcast --hosts "$h" \
     --ranks-per-host "$l" --systems nezha-all,mpi-best-default --sizes 4K,8K,16K,32K,64K,256K,1M \
     --reps 1 --time-budget 1 --run-timeout 300 --out "$O/$3-$2$T.md" --json "$O/$3-$2$T.json" > "$O/$3-$2$T.log" 2>&1)
}
for lay in 2x4 4x2; do
  (
    flock -x 9
    one "$A" A1 $lay; one "$B" B1 $lay; one "$B" B2 $lay; one "$A" A2 $lay
  ) 9>/tmp/nezha-quiet.lock
done
echo "$(date -u +%H:%M:%S) end" >> "$O/times.txt"
