#!/bin/bash
# ABBA: base (ce2d3e6) vs hA, ranks_per_host.py small sizes against Open MPI, 2x4 and 4x2
PY=/work/main/.venv/bin/python
O=/tmp/hA/cmp; mkdir -p $O
export NEZHA_LAB_NAME=ha18
for lay in 2x4 4x2; do H=${lay%x*}; L=${lay#*x}
 i=0
 for t in hA-base hA hA hA-base; do i=$((i+1))
  echo "$(date -u +%T) $t ${lay} run $i" >> $O/times.txt
  (cd /work/$t && PYTHONPATH=/work/$t $PY bench/ranks_per_host.py --hosts $H --ranks-per-host $L --systems nezha-all,mpi-best-default --sizes 4,64,1K --reps 1 --time-budget 1.5 --json $O/${lay}-$i-$t.json --out $O/${lay}-$i-$t.md > $O/${lay}-$i-$t.log 2>&1)
 done
done
echo "$(date -u +%T) done" >> $O/times.txt
