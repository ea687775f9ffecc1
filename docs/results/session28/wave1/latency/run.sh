#!/bin/bash
# 4 B / 1 KiB again, A B A B (wave1's first compare, after-1, read 61.0 µs at 4 B against 35.6
# in after-2 and 38.7-39.4 before): `nezha bench compare --quick --max-size 1K`, each tree from
# its own checkout. usage: run.sh AFTER BEFORE
A=$(realpath "$1"); B=$(realpath "$2"); O=$(dirname "$(readlink -f "$0")"); PY=/work/main/.venv/bin/python
exec 9>/tmp/nezha-quiet.lock; flock -x 9
for t in A1 B1 A2 B2 A3 B3; do
  case $t in A*) T=$A;; *) T=$B;; esac
  echo "$(date -u +%H:%M:%S) $t $(git -C $T rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  (cd $T && PYTHONPATH=$T $PY -m nezha bench compare --quick --max-size 1K --systems nezha-all,nezha-rail0 \
     --out /tmp/m28/lat-$t > $O/$t.log 2>&1)
done
{ for t in A1 B1 A2 B2 A3 B3; do echo "## $t"; grep -E '^\| (4 B|1 KiB) \|' $O/$t.log | head -2; done; } > $O/summary.txt
