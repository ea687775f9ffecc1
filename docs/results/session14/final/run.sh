#!/bin/bash
# Final-tree measurements (one lock)
set -x
F=/tmp/final; A=/tmp/after; PY=/work/main/.venv/bin/python; O=/tmp/finalout; mkdir -p $O
date -u
for R in $A $F $A $F; do
  (cd $R && PYTHONPATH=$R $PY -m nezha bench compare --quick --max-size 64M --systems nezha-all,nezha-rail0,mpi-all-ring --out $O/wave1-$(basename $R)-$RANDOM >> $O/wave1-$(basename $R).txt 2>&1)
done
cd $F; export PYTHONPATH=$F
date -u
$PY bench/failover.py --sizes 1K,64M --failures 4 --json $O/failover-final.json > $O/failover-final.txt 2>&1
date -u
for p in 32k 64k 32k 64k; do
  NEZHA_MIN_RAIL_PIECE=$p $PY -m nezha bench compare --rates 400mbit --collectives allreduce --systems nezha-all,mpi-all-ring --min-size 16K --max-size 1M --reps 1 --out $O/piece-$p-$RANDOM >> $O/piece-$p.txt 2>&1
done
date -u
$PY -m nezha bench compare --hosts 4 --rates 400mbit --ina 1 --systems nezha-rail1,nezha-ina,nezha-ina-small,gloo-rail0 --collectives allreduce --max-size 1K --reps 3 --out $O/ina4 > $O/ina4.txt 2>&1
date -u
$PY bench/ranks_per_host.py --hosts 2 --ranks-per-host 2 --rails 2 --systems nezha-hier-aligned,nezha-hier-striped --out $O/rph22.md > $O/rph22.txt 2>&1
date -u
for r in 800mbit 1600mbit; do
  $PY -m nezha bench compare --rates $r --collectives allreduce --systems nezha-all,nezha-all-zc,mpi-all-ring --min-size 1M --max-size 16M --reps 1 --time-budget 0.3 --out $O/faster-$r > $O/faster-$r.txt 2>&1
done
date -u
echo done
