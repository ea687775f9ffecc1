#!/bin/bash
# wave 1 before (62b069d, last landing, worktree /work/t31) vs after (main), session 21: the compare
# suite and the failover bench interleaved (tools/wave1.sh; this script had an inline copy of it)
exec /work/main/tools/wave1.sh /work/t31 /work/main /work/main/docs/results/session21/wave1
