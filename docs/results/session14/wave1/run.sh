#!/bin/bash
# Wave-1 before/after, interleaved, one lock for all: before = cc0d875 (/tmp/before), after = main
set -x
cd /work/main
B=/tmp/before; A=/tmp/after
PY=/work/main/.venv/bin/python
date -u
for R in $B $A; do
  (cd $R && PYTHONPATH=$R $PY -m nezha bench compare --quick --max-size 64M --systems nezha-all,nezha-rail0,mpi-all-ring --out /tmp/ab1/compare-$(basename $R)-1 > /tmp/ab1/compare-$(basename $R)-1.txt 2>&1)
done
date -u
for R in $B $A; do
  PYTHONPATH=$R $PY $A/bench/failover.py --sizes 1K,1M,64M --failures 6 --json /tmp/ab1/failover-$(basename $R).json > /tmp/ab1/failover-$(basename $R).txt 2>&1
done
date -u
for R in $A $B; do
  PYTHONPATH=$R $PY /work/main/.venv/bin/nezha lab run -- env TAG=$(basename $R) PYTHONPATH=$R $PY /tmp/vc/ab.py 2>&1 | grep -E "^(before|after) " >> /tmp/ab1/ab.txt
done
for R in $A $B; do
  (cd $R && PYTHONPATH=$R $PY -m nezha bench compare --quick --max-size 64M --systems nezha-all,nezha-rail0,mpi-all-ring --out /tmp/ab1/compare-$(basename $R)-2 > /tmp/ab1/compare-$(basename $R)-2.txt 2>&1)
done
date -u
echo done
