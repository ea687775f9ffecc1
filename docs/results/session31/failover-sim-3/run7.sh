#!/bin/sh
cd /work/main || exit 1
exec flock -x /tmp/nezha-quiet.lock sh -c "
echo LOCK \$(date -u +%T)
PYTHONPATH=/work/main timeout -s INT 840 /work/main/.venv/bin/python bench/failover.py --sizes 64M \
  --modes blackhole --failures 36 --fast-cuts --gap-s 0.3 --seed 7 --lab-name nzm31 \
  --json /tmp/m31/fo/failover-64M-7.json
echo rc=\$? UNLOCK \$(date -u +%T)"
