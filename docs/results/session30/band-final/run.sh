#!/bin/bash
# Issue 17's small and medium band on the final tree of session 30 (h46-h52 merged), both rate
# pairs, 4 collectives, 4 B-256 KiB, medians of 3 interleaved repetitions, under the timing lock:
#   cd /work/main && bash docs/results/session30/band-final/run.sh
OUT=$(realpath "$(dirname "$0")"); TMP=/tmp/nezha-band30; mkdir -p $TMP
cd /work/main
for rates in 400mbit,100mbit 400mbit; do
  tag=${rates//,/-}
  echo "$(date -u +%H:%M:%S) start $tag $(git rev-parse --short HEAD)" >> $OUT/times.txt
  flock -x /tmp/nezha-quiet.lock /work/main/.venv/bin/python -m nezha bench compare --rates $rates \
    --collectives allreduce,broadcast,allgather,reduce_scatter --systems nezha-all,mpi-all,mpi-rail0 \
    --min-size 4 --max-size 256K --reps 3 --reps-other 3 --time-budget 0.3 --max-minutes 14 \
    --out $TMP/$tag > $OUT/$tag.log 2>&1
  echo "$(date -u +%H:%M:%S) end $tag rc $?" >> $OUT/times.txt
  cp $TMP/$tag/compare.md $OUT/$tag.md 2>/dev/null
  gzip -c $TMP/$tag/compare.json > $OUT/$tag.json.gz 2>/dev/null
done
