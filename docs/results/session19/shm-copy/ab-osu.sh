#!/bin/bash
# one host, host area (and the shm rings with NEZHA_SHM_COLL=inf): base (541c6ec, /work/hA-base)
# vs this tree (/work/hA), order A B B A, Open MPI sm (btl sm,self: vader + CMA) between;
# osu_allreduce under mpirun, float32 sum in place, mean latency (us) per size.
# run under flock -x /tmp/nezha-quiet.lock; osu.sh = /tmp/hA/osu.sh (a copy is in this folder)
O=/tmp/hA; S=$(dirname $0)/osu.sh
for np in 4 2; do
  echo "## $np ranks, 1M:16M, budget 1 s"
  for t in base hA mpi hA base mpi; do
    echo -n "$t "; case $t in base) $S /work/hA-base $np 1M:16M 1;; hA) $S /work/hA $np 1M:16M 1;; mpi) $S /work/hA $np 1M:16M 1 mpi;; esac
  done
  echo "## $np ranks, 4:64K, budget 0.3 s"
  for t in base hA hA base mpi; do
    echo -n "$t "; case $t in base) $S /work/hA-base $np 4:64K 0.3;; hA) $S /work/hA $np 4:64K 0.3;; mpi) $S /work/hA $np 4:64K 0.3 mpi;; esac
  done
done
echo "## 4 ranks, shm rings (NEZHA_SHM_COLL=inf), 1M:16M, budget 1 s"
for t in base hA hA base; do
  echo -n "$t "; [ $t = base ] && NEZHA_SHM_COLL=inf $S /work/hA-base 4 1M:16M 1 || NEZHA_SHM_COLL=inf $S /work/hA 4 1M:16M 1
done
