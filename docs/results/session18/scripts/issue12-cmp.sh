#!/bin/bash
set -u
OUT=/work/main/docs/results/session18/issue12
mkdir -p $OUT
PY=/work/main/.venv/bin/python
exec 9>/tmp/nezha-quiet.lock
flock -x 9
date -u > $OUT/times.txt
cmp() { # tree label
  (cd /work/$1 && PYTHONPATH=/work/$1 $PY -m nezha bench compare --quick --max-size 64M \
     --systems nezha-all,nezha-rail0,mpi-all-ring --out $OUT/compare-$2) > $OUT/compare-$2.log 2>&1
}
cmp t479 before-1; cmp tcec after-1; cmp tcec after-2; cmp t479 before-2
date -u >> $OUT/times.txt
echo DONE >> $OUT/times.txt
