#!/bin/bash
# Wave 1 before and after a structural change, in one session (the brief's rule): the compare
# suite twice per tree and the failover bench once per tree, interleaved ABBA, under the
# exclusive timing lock; the rows that carry wave 1's figures gathered in OUTDIR/summary.txt.
# usage: tools/wave1.sh BEFORE_TREE AFTER_TREE OUTDIR   (checkouts with their extensions built)
set -u
[ $# -eq 3 ] || { echo "usage: $0 BEFORE_TREE AFTER_TREE OUTDIR" >&2; exit 2; }
BEFORE=$(realpath "$1"); AFTER=$(realpath "$2"); OUT=$(realpath -m "$3")
PY=${PY:-$(realpath "$(dirname "$0")/..")/.venv/bin/python}
TMP=${WAVE1_TMP:-/tmp/nezha-wave1}   # compare's full output and failover's JSON (large)
mkdir -p "$OUT" "$TMP"
exec 9>/tmp/nezha-quiet.lock; flock -x 9
st() { echo "$(date -u +%H:%M:%S) $* load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/times.txt"; }
intree() { local t=$1; shift; (cd "$t" && PYTHONPATH="$t" "$@"); }
cmp() { st "compare $1 $2"; intree "$1" "$PY" -m nezha bench compare --quick --max-size 64M \
   --systems nezha-all,nezha-rail0,mpi-all-ring --out "$TMP/compare-$2" \
   > "$OUT/compare-$2.log" 2>&1; }
fo() { st "failover $1 $2"; intree "$1" "$PY" bench/failover.py --sizes 1K,64M --failures 4 \
   --json "$TMP/failover-$2.json" > "$OUT/failover-$2.log" 2>&1; }
cmp "$AFTER" after-1; cmp "$BEFORE" before-1; cmp "$BEFORE" before-2; cmp "$AFTER" after-2
fo "$BEFORE" before; fo "$AFTER" after
st "wave1 done"
{ echo "# allreduce, nezha-all: size | µs | % of limit | / nezha-rail0 | / mpi-all-ring"
  for r in after-1 before-1 before-2 after-2; do
    echo "## $r"; grep -m5 -E '^\| (4 B|1 KiB|16 MiB|32 MiB|64 MiB) \|' "$OUT/compare-$r.log"; done
  echo "# failover: size | mode | failures | extra ms median / worst | ... | wrong"
  for r in before after; do
    echo "## $r"; grep -E '^\| [0-9]+ \| (down|blackhole)' "$OUT/failover-$r.log"; done
} > "$OUT/summary.txt"
