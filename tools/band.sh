#!/bin/bash
# Issue 17's small and medium band: both rate pairs, 4 collectives, 4 B-256 KiB, nezha-all against
# Open MPI, medians of 3 interleaved repetitions, under the exclusive timing lock; OUTDIR gets each
# rate pair's log, compare.md and compare.json.gz, and times.txt. Table: tools/band_table.py.
# usage: tools/band.sh OUTDIR   (from the tree to time: bench compare prints "# code: nezha from")
set -u
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
OUT=$(realpath -m "$1"); TMP=${BAND_TMP:-/tmp/nezha-band}; mkdir -p "$OUT" "$TMP"
PY=${PY:-$(realpath "$(dirname "$0")/..")/.venv/bin/python}
for rates in 400mbit,100mbit 400mbit; do
  tag=${rates//,/-}
  echo "$(date -u +%H:%M:%S) start $tag $(git rev-parse --short HEAD)" >> "$OUT/times.txt"
  flock -x /tmp/nezha-quiet.lock "$PY" -m nezha bench compare --rates $rates \
    --collectives allreduce,broadcast,allgather,reduce_scatter --systems nezha-all,mpi-all,mpi-rail0 \
    --min-size 4 --max-size 256K --reps 3 --reps-other 3 --time-budget 0.3 --max-minutes 14 \
    --out "$TMP/$tag" > "$OUT/$tag.log" 2>&1
  echo "$(date -u +%H:%M:%S) end $tag rc $?" >> "$OUT/times.txt"
  cp "$TMP/$tag/compare.md" "$OUT/$tag.md" 2>/dev/null
  # kept without each run's worker doc (the summary band_table.py reads stays): 12 MB -> 40 KB
  "$PY" -c 'import gzip, json, sys
d = json.load(open(sys.argv[1]))
for r in d.get("runs", []) + d.get("latency_runs", []):
    r["doc"] = None
d["slimmed"] = "each run'"'"'s worker doc dropped (tools/band.sh)"
json.dump(d, gzip.open(sys.argv[2], "wt"))' "$TMP/$tag/compare.json" "$OUT/$tag.json.gz" 2>/dev/null
done
