#!/bin/bash
# wave 1 on the final tree (session 30: h46-h52 merged): compare --quick twice, failover once, under the lock
OUT=$(realpath "$(dirname "$0")"); PY=/work/main/.venv/bin/python; cd /work/main
exec 9>/tmp/nezha-quiet.lock; flock -x 9
for i in 1 2; do echo "$(date -u +%H:%M:%S) compare-$i" >> $OUT/times.txt
  PYTHONPATH=/work/main $PY -m nezha bench compare --quick --max-size 64M --systems nezha-all,nezha-rail0,mpi-all-ring \
    --out /tmp/nezha-wave1/final-$i > $OUT/compare-$i.log 2>&1; done
echo "$(date -u +%H:%M:%S) failover" >> $OUT/times.txt
PYTHONPATH=/work/main $PY bench/failover.py --sizes 1K,64M --failures 4 --json /tmp/nezha-wave1/final-fo.json > $OUT/failover.log 2>&1
echo "$(date -u +%H:%M:%S) done" >> $OUT/times.txt
{ for i in 1 2; do echo "## compare-$i"; grep -m5 -E '^\| (4 B|1 KiB|16 MiB|32 MiB|64 MiB) \|' $OUT/compare-$i.log; done
  echo "## failover"; grep -E '^\| [0-9]+ \| (down|blackhole)' $OUT/failover.log; } > $OUT/summary.txt
