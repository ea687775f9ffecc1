#!/bin/bash
# One exclusive hold: the final tree (B) against main (A), A B B A, at 2 x 4 and 4 x 2:
# allgather 1-4 KiB a rank, allreduce 4 KiB-1 MiB, reduce_scatter 1-4 KiB a rank (run.sh).
D=$(dirname $(readlink -f $0)); OUT=${OUT:-$D}
exec 9>/tmp/nezha-quiet.lock; flock -x 9
export HELD=1 OUT
COLL=allgather SIZES=1K,2K,4K bash $D/run.sh
SIZES=4K,8K,16K,32K,64K,256K,1M bash $D/run.sh
COLL=reduce_scatter SIZES=1K,2K,4K bash $D/run.sh
