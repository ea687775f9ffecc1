#!/bin/bash
# ABBA: base (a2b773c) vs this tree (rd_hosts), ranks_per_host.py small sizes, 2x4 and 4x2
PY=/work/main/.venv/bin/python
SYS=${SYS:-nezha-all,mpi-best-default,mpi-all}
SIZES=${SIZES:-4,64,1K}
O=${O:-/tmp/h16/cmp}; mkdir -p $O
for p in "2 4" "4 2"; do set -- $p
 i=0
 for t in hI-base hI hI hI-base; do i=$((i+1))
  echo "$(date -u +%T) $t ${1}x${2} run $i" >> $O/times.txt
  (cd /work/$t && PYTHONPATH=/work/$t $PY bench/ranks_per_host.py --hosts $1 --ranks-per-host $2 --systems $SYS --sizes $SIZES --reps ${REPS:-2} --json $O/${1}x${2}-$i-$t.json --out $O/${1}x${2}-$i-$t.md > $O/${1}x${2}-$i-$t.log 2>&1)
 done
done
echo "$(date -u +%T) done" >> $O/times.txt
