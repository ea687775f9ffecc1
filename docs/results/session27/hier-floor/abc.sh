#!/bin/bash
# What the tail costs: default (A), no model sync after warm-up (B), no model sync and no
# failover (no vote, C); 2 x 4, 16 MiB, 12 calls each way; A B C C B A in one lock hold
D=$(dirname $(readlink -f $0)); O=${1:-/tmp/h34-bd/abc}
exec 9>/tmp/nezha-quiet.lock; flock -x 9
i=0
for v in A B C C B A; do
  i=$((i+1))
  case $v in
    A) x=();;
    B) x=(-x BD_NOSYNC=1);;
    C) x=(-x BD_NOSYNC=1 -x NEZHA_FAILOVER=0);;
  esac
  $D/bd.sh /work/h34 $O/$i-$v 2 4 -x BD_REPS=12 "${x[@]}"
done
