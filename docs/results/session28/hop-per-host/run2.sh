#!/bin/bash
# One exclusive hold (< 25 min): the 4 x 1 check (run41.sh), then allgather at 2 x 4 and 4 x 2
# (run.sh with COLL=allgather; per-rank sizes 1K-16K, around the switch points that moved).
D=$(dirname $(readlink -f $0)); OUT=${OUT:-$D}
exec 9>/tmp/nezha-quiet.lock; flock -x 9
export HELD=1 OUT
bash $D/run41.sh
COLL=allgather SIZES=1K,2K,4K,16K bash $D/run.sh
