#!/bin/sh
# usage: run.sh TAG MODES FAILURES SEED TIMEOUT_S  (64 MiB, --fast-cuts; timeout INSIDE flock:
# it must not count the wait for the lock)
cd /work/h55 || exit 1
D=/work/h55/docs/results/session31/failover-sim-3
exec flock -x /tmp/nezha-quiet.lock sh -c "
echo LOCK \$(date -u +%T)
PYTHONPATH=/work/h55 timeout -s INT $5 /work/main/.venv/bin/python bench/failover.py --sizes 64M \
  --modes $2 --failures $3 --fast-cuts --gap-s 0.3 --seed $4 --lab-name nzh55 \
  --json $D/failover-64M-$1.json
echo rc=\$? UNLOCK \$(date -u +%T)"
