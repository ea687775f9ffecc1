#!/bin/bash
# issue 12 on the final tree (main): several ranks per host, one host over shm, failover with 2 ranks per host
source /tmp/m18/lib.sh; lock; O=$R/issue12; mkdir -p $O
SYS=nezha-all,nezha-flat,mpi-best-default,mpi-all,mpi-all-ring,gloo-rail0,gloo-all
stamp "issue12 4x2"; intree main $PY bench/ranks_per_host.py --hosts 4 --ranks-per-host 2 --systems $SYS --reps 3 \
   --json /tmp/m18/4x2.json --out $O/4x2.md > $O/4x2.log 2>&1
stamp "issue12 2x4"; intree main $PY bench/ranks_per_host.py --hosts 2 --ranks-per-host 4 --systems $SYS --reps 3 \
   --json /tmp/m18/2x4.json --out $O/2x4.md > $O/2x4.log 2>&1
stamp "issue12 shm"; intree main $PY bench/compare_loopback.py --backends nezha-shm,mpi-sm --reps 4 -m 4:64M --time-budget 0.3 \
   --out /tmp/m18/loopback-shm > $O/loopback-shm.txt 2>&1
stamp "issue12 failover 2/host"; intree main $PY bench/failover.py --ranks-per-host 2 --sizes 1K,64M --failures 4 \
   --json /tmp/m18/fo2.json > $O/failover-2-per-host.log 2>&1
stamp "issue12 done"
