#!/bin/bash
# Wave 1's figures on one tree (after tools/wave1.sh's before/after, on the final tree): the
# compare suite twice and the failover bench once, under the exclusive timing lock; the rows
# that carry wave 1's figures gathered in OUTDIR/summary.txt.
# usage: tools/wave1-tree.sh TREE OUTDIR   (a checkout with its extensions built)
set -u
[ $# -eq 2 ] || { echo "usage: $0 TREE OUTDIR" >&2; exit 2; }
T=$(realpath "$1"); OUT=$(realpath -m "$2"); mkdir -p "$OUT"
PY=${PY:-$(realpath "$(dirname "$0")/..")/.venv/bin/python}
TMP=${WAVE1_TMP:-/tmp/nezha-wave1}; mkdir -p "$TMP"
exec 9>/tmp/nezha-quiet.lock; flock -x 9
cd "$T" || exit 2
for i in 1 2; do echo "$(date -u +%H:%M:%S) compare-$i" >> "$OUT/times.txt"
  PYTHONPATH="$T" "$PY" -m nezha bench compare --quick --max-size 64M \
    --systems nezha-all,nezha-rail0,mpi-all-ring --out "$TMP/final-$i" > "$OUT/compare-$i.log" 2>&1; done
echo "$(date -u +%H:%M:%S) failover" >> "$OUT/times.txt"
PYTHONPATH="$T" "$PY" bench/failover.py --sizes 1K,64M --failures 4 --json "$TMP/final-fo.json" \
  > "$OUT/failover.log" 2>&1
echo "$(date -u +%H:%M:%S) done" >> "$OUT/times.txt"
{ for i in 1 2; do echo "## compare-$i"; grep -m5 -E '^\| (4 B|1 KiB|16 MiB|32 MiB|64 MiB) \|' "$OUT/compare-$i.log"; done
  echo "## failover"; grep -E '^\| [0-9]+ \| (down|blackhole)' "$OUT/failover.log"; } > "$OUT/summary.txt"
