#!/bin/bash
# 4 x 1 (one rank per host), equal rails 2 x 400 Mbit/s: nezha-all and Open MPI's forced ring,
# allreduce 4 B-1 MiB (`nezha bench compare --quick --max-size 1M`), main (A) against this
# branch (B), A B B A, frozen copies as in run.sh, under the exclusive timing lock.
PY=/work/main/.venv/bin/python; D=$(dirname $(readlink -f $0)); OUT=${OUT:-$D}; mkdir -p $OUT
[ -n "$HELD" ] || { exec 9>/tmp/nezha-quiet.lock; flock -x 9; }  # HELD: a caller holds it
for t in A:1 B:1 B:2 A:2; do
  T=/tmp/h35/${t%%:*}; n=4x1-${t%%:*}${t##*:}
  echo "$(date -u +%H:%M:%S) $n load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/times.txt
  (cd $T && PYTHONPATH=$T timeout 900 $PY -m nezha bench compare --quick --max-size 1M \
    --systems nezha-all,mpi-all-ring --out $OUT/$n > $OUT/$n.log 2>&1)
done
echo "$(date -u +%H:%M:%S) end" >> $OUT/times.txt
