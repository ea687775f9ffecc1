#!/bin/bash
# Second flock -x hold (run it under the lock): B A A B of bench compare, broadcast 256 B-2 KiB,
# 7 interleaved repetitions (the small sizes' repetitions are bimodal), 400 + 100.
D=$(dirname $(readlink -f $0)); PY=/work/main/.venv/bin/python; mkdir -p $D/runs /tmp/h47
rates=400mbit,100mbit
for t in h47:B3 h47-base:A3 h47-base:A4 h47:B4; do
  T=/work/${t%%:*}; TAG=small-${rates//,/-}-${t##*:}
  cmd="$PY -m nezha bench compare --rates $rates --collectives broadcast --systems nezha-all,mpi-all,mpi-rail0 --min-size 256 --max-size 2K --reps 1 --reps-other 7 --time-budget 0.3 --no-lab-check --out /tmp/h47/$TAG"
  echo "$(date -u +%H:%M:%S) start $TAG $(git -C $T rev-parse --short HEAD): $cmd" >> $D/times.txt
  (cd $T && PYTHONPATH=$T timeout 400 $cmd > /tmp/h47/$TAG.log 2>&1)
  echo "$(date -u +%H:%M:%S) end $TAG rc $?" >> $D/times.txt
  mkdir -p $D/runs/$TAG; cp /tmp/h47/$TAG/compare.md /tmp/h47/$TAG.log $D/runs/$TAG/ 2>/dev/null
  gzip -c /tmp/h47/$TAG/compare.json > $D/runs/$TAG/compare.json.gz 2>/dev/null
done
