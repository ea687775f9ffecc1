#!/bin/bash
# wave 1 before (a2b773c, last landing, worktree /work/b22) vs after (main), session 22: the compare
# suite and the failover bench interleaved (tools/wave1.sh; this script had an inline copy of it)
exec /work/main/tools/wave1.sh /work/b22 /work/main /work/main/docs/results/session22/wave1
