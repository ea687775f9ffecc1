#!/bin/bash
# issue 12 on the final tree (main, with nz_copy): 4 x 2 and 2 x 4 against the floor and Open MPI
source /tmp/m19/lib.sh; lock; O=/work/main/docs/results/session19/issue12; mkdir -p $O
SYS=nezha-all,nezha-flat,mpi-best-default,mpi-all,mpi-all-ring,gloo-rail0,gloo-all
st() { echo "$(date -u +%H:%M:%S) $*" >> $O/times.txt; }
st 4x2; intree main $PY bench/ranks_per_host.py --hosts 4 --ranks-per-host 2 --systems $SYS --reps 3 \
   --json /tmp/m19/4x2.json --out $O/4x2.md > $O/4x2.log 2>&1
st 2x4; intree main $PY bench/ranks_per_host.py --hosts 2 --ranks-per-host 4 --systems $SYS --reps 3 \
   --json /tmp/m19/2x4.json --out $O/2x4.md > $O/2x4.log 2>&1
st done
