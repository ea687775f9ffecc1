#!/bin/bash
# 4 B - 2 KiB with 7 interleaved repetitions (the small sizes' repetitions are bimodal):
# B then A on the given rates. usage: small.sh RATES TAGSUFFIX
D=$(dirname $(readlink -f $0)); PY=/work/main/.venv/bin/python
for t in h44:B h44-base:A; do
  T=/work/${t%%:*}; TAG=small-$2-${t##*:}
  cmd="$PY -m nezha bench compare --rates $1 --collectives broadcast --systems nezha-all,mpi-all,mpi-rail0 --min-size 4 --max-size 2K --reps 1 --reps-other 7 --time-budget 0.3 --no-lab-check --out /tmp/h44/$TAG"
  (cd $T && export PYTHONPATH=$T && flock -x /tmp/nezha-quiet.lock bash -c "echo \"\$(date -u +%H:%M:%S) start $TAG $(git -C $T rev-parse --short HEAD): $cmd\" >> $D/times.txt; $cmd > /tmp/h44/$TAG.log 2>&1; echo \"\$(date -u +%H:%M:%S) end $TAG rc \$?\" >> $D/times.txt")
  mkdir -p $D/runs/$TAG; cp /tmp/h44/$TAG/compare.md /tmp/h44/$TAG.log $D/runs/$TAG/ 2>/dev/null
done
