#!/bin/bash
# 4x2 nezha-all 32k vs 64k, ABBA
cd /work/hB; PY=/work/main/.venv/bin/python; O=/tmp/hB/rep; mkdir -p $O
r() { env NEZHA_MIN_RAIL_PIECE=$1 PYTHONPATH=/work/hB $PY bench/ranks_per_host.py --hosts 4 --ranks-per-host 2 --systems nezha-all \
   --sizes ${SIZES:-16K,32K,64K,128K,256K} --reps 1 --json $O/$1-$2.json --out $O/$1-$2.md > $O/$1-$2.log 2>&1; grep -A8 '^| Size' $O/$1-$2.md; }
r 32k a; r 64k a; r 64k b; r 32k b
