#!/bin/bash
# wave 1 before (e73d223, last landing, worktree /work/t29) vs after (main), session 19: the compare
# suite and the failover bench interleaved (tools/wave1.sh; this script had an inline copy of it)
exec /work/main/tools/wave1.sh /work/t29 /work/main /work/main/docs/results/session19/wave1
