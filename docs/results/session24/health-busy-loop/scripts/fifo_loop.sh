#!/bin/bash
# under flock -x: 4 ranks on loop rails, async allreduces, NEZHA_PROGRESS_SCHED=fifo with the
# health thread at SCHED_FIFO 2 (ee1c0ba re-applied), old (h20-base) vs fixed (h20-rt), ABBA
for T in /work/h20-base /work/h20-rt /work/h20-rt /work/h20-base; do
  echo "== $T $(date -u +%T)"
  $(dirname $(readlink -f $0))/runN.sh $T 4 DIE_AT=150 NEZHA_PROGRESS_SCHED=fifo 2>&1 | grep -v WARN | grep "training\|policy\|threads\|next\|rc="
done
