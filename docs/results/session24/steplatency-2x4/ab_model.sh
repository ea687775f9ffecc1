#!/bin/bash
# 2 x 4, allreduce 4 B-1 KiB: M = this tree with NEZHA_RAIL_ALPHA=model (the constants),
# A = this tree with auto (measured), O = 6b5771b (before the measure), M A O O A M in one lab
# (run under the lab/lock wrapper below). Separates the measure's side effects from the noise.
PY=/work/main/.venv/bin/python; NEW=/work/main; OLD=/work/base24
for v in M A O O A M; do
  case $v in M) T=$NEW; E=model;; A) T=$NEW; E=auto;; O) T=$OLD; E=auto;; esac
  echo "== allreduce $v"
  PYTHONPATH=$T NEZHA_RAIL_ALPHA=$E $PY -m nezha lab run --timeout 240 -- $PY $T/bench/osu_allreduce.py \
    --backend nezha -m 4:1K --time-budget 0.3 | grep -v "^#" | awk 'NF>1{print $1, $2}'
done
