#!/bin/bash
# issue 17 / session 28 (h35): 2 x 4 and 4 x 2 allreduce 4 KiB-1 MiB, nezha-all against Open
# MPI's best default and its forced ring, main (A, 7cd1213) against this branch (B), in the
# order A B B A, under the exclusive timing lock. A and B are frozen copies of the two trees
# (tar of the checkout with its built extensions, /tmp/h35/A and /tmp/h35/B), so neither
# moves while the runs go on. OUT: where the tables go; SIZES (default 4K,16K,64K,256K,1M)
# and COLL (default allreduce).
PY=/work/main/.venv/bin/python; D=$(dirname $(readlink -f $0)); OUT=${OUT:-$D}; mkdir -p $OUT
[ -n "$HELD" ] || { exec 9>/tmp/nezha-quiet.lock; flock -x 9; }  # HELD: a caller holds it
for hl in ${LAYOUTS:-"2 4" "4 2"}; do
  set -- $hl
  for t in A:1 B:1 B:2 A:2; do
    T=/tmp/h35/${t%%:*}; n=${COLL:+$COLL-}${1}x$2-${t%%:*}${t##*:}
    echo "$(date -u +%H:%M:%S) $n load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/times.txt
    (cd $T && PYTHONPATH=$T timeout 600 $PY bench/ranks_per_host.py --hosts $1 --ranks-per-host $2 --collective ${COLL:-allreduce} \
      --systems nezha-all,mpi-best-default,mpi-all-ring --sizes ${SIZES:-4K,16K,64K,256K,1M} \
      --reps 2 --time-budget 1 --run-timeout 300 --json $OUT/$n.json --out $OUT/$n.md > $OUT/$n.log 2>&1)
  done
done
echo "$(date -u +%H:%M:%S) end" >> $OUT/times.txt
