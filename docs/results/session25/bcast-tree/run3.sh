#!/bin/bash
# The failover bench's 1 KiB row (back-to-back allreduces, a rail cut and healed 4 times per
# mode), A then B, each building its own lab; under the exclusive timing lock.
# (run2.sh's attempt failed: NEZHA_LAB_NAME exported there sent the ranks to another lab.)
PY=/work/main/.venv/bin/python; A=/work/h23-base; B=/work/h23; OUT=$1; mkdir -p $OUT
unset NEZHA_LAB_NAME
flock -x /tmp/nezha-quiet.lock bash -c "
  echo \"\$(date -u +%H:%M:%S) start load \$(cut -d' ' -f1-3 /proc/loadavg)\" >> $OUT/times.txt
  for v in A B; do [ \$v = A ] && T=$A || T=$B
    (cd \$T && PYTHONPATH=\$T timeout 400 $PY bench/failover.py --sizes 1K --failures 4 > $OUT/\$v.log 2>&1)
    echo \"\$(date -u +%H:%M:%S) failover \$v rc \$?\" >> $OUT/times.txt; done"
