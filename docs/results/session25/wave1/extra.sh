#!/bin/bash
# two more compare runs (after, before), as tools/wave1.sh's cmp, for the 16 MiB after-2 dip
PY=/work/main/.venv/bin/python; OUT=/work/main/docs/results/session25/wave1; TMP=/tmp/nezha-wave1
exec 9>/tmp/nezha-quiet.lock; flock -x 9
st() { echo "$(date -u +%H:%M:%S) $* load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/times.txt"; }
cmp() { st "compare $1 $2"; (cd $1 && PYTHONPATH=$1 $PY -m nezha bench compare --quick --max-size 64M \
   --systems nezha-all,nezha-rail0,mpi-all-ring --out "$TMP/compare-$2" > "$OUT/compare-$2.log" 2>&1); }
cmp /work/main after-3; cmp /work/base25 before-3; cmp /work/base25 before-4; cmp /work/main after-4
st "extra done"
for r in after-3 before-3 before-4 after-4; do echo "## $r"; grep -m5 -E '^\| (4 B|1 KiB|16 MiB|32 MiB|64 MiB) \|' "$OUT/compare-$r.log"; done >> $OUT/summary-extra.txt
