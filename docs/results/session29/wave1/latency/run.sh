#!/bin/bash
# 4 B and 1 KiB allreduce, before (base29 = 744c8b2) and after (main), A B A B A B, one lock
OUT=$(realpath "$(dirname "$0")"); PY=/work/main/.venv/bin/python
exec 9>/tmp/nezha-quiet.lock; flock -x 9
for i in 1 2 3; do for t in /work/base29 /work/main; do
  n=$(basename $t)-$i; echo "$(date -u +%H:%M:%S) $n" >> $OUT/times.txt
  (cd $t && PYTHONPATH=$t $PY -m nezha bench compare --quick --max-size 1K --systems nezha-all,nezha-rail0 \
     --no-lab-check --out /tmp/nezha-lat29/$n > $OUT/$n.log 2>&1)
done; done
for f in $OUT/*-?.log; do echo "$(basename $f .log) $(grep -E '^\| (4 B|1 KiB) \|' $f | awk -F'|' '{printf "%s %s; ", $2, $3}')"; done > $OUT/summary.txt
