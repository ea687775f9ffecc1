#!/bin/bash
# A B B A: A = main (the baseline worktree /work/h44-base), B = this branch (/work/h44), on
# 400 + 100 then on 400 + 400; each step one `nezha bench compare` under the exclusive lock.
D=$(dirname $(readlink -f $0))
for rates in 400mbit,100mbit 400mbit; do
  r=$([ $rates = 400mbit ] && echo equal || echo unequal)
  for t in h44-base:A1 h44:B1 h44:B2 h44-base:A2; do
    $D/run.sh /work/${t%%:*} $r-${t##*:} $rates
  done
done
