#!/bin/bash
# baseline: small allreduce 2x4 and 4x2, nezha-all vs Open MPI rows
cd /work/hI
PY=/work/main/.venv/bin/python
SYS=nezha-all,mpi-best-default,mpi-all
for p in "2 4" "4 2"; do set -- $p
 echo "$(date -u +%T) ${1}x${2}"
 PYTHONPATH=/work/hI $PY bench/ranks_per_host.py --hosts $1 --ranks-per-host $2 --systems $SYS --sizes 4,64,1K --reps 3 --json /tmp/h16/base-${1}x${2}.json --out /tmp/h16/base-${1}x${2}.md > /tmp/h16/base-${1}x${2}.log 2>&1
done
echo "$(date -u +%T) done"
