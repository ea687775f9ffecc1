#!/bin/sh
# run 3: 64 MiB, both modes, --fast-cuts; timeout INSIDE flock (it must not count the wait)
cd /work/h50 || exit 1
D=/work/h50/docs/results/session30/failover-sim-2
exec flock -x /tmp/nezha-quiet.lock sh -c "
echo LOCK \$(date -u +%T)
PYTHONPATH=/work/h50 timeout -s INT 900 /work/main/.venv/bin/python bench/failover.py --sizes 64M \
  --modes down,blackhole --failures 45 --fast-cuts --gap-s 0.3 --seed 3 --lab-name nzh50 \
  --json $D/failover-64M-samecall-3.json
echo rc=\$? UNLOCK \$(date -u +%T)"
