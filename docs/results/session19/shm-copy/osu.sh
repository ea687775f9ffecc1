#!/bin/bash
# osu.sh TREE NP SIZES BUDGET [mpi]  (NEZHA_* env passes through)
cd $1; M=/work/main/.venv/bin/mpirun
if [ "$5" = mpi ]; then B="--mca btl sm,self --mca pml ob1"; BE=mpi; else B="--mca btl tcp,self --mca btl_tcp_if_include lo --mca pml ob1"; BE=nezha; fi
X=""; for v in $(env | grep ^NEZHA_ | cut -d= -f1); do X="$X -x $v"; done
NEZHA_SOCKET_IFNAME=lo NEZHA_RAILS=tcp,shm PYTHONPATH=$1 $M --allow-run-as-root --oversubscribe -np $2 --bind-to none --mca mpi_yield_when_idle 1 $B -x NEZHA_SOCKET_IFNAME -x NEZHA_RAILS -x PYTHONPATH $X /work/main/.venv/bin/python bench/osu_allreduce.py --backend $BE -m $3 -l -f --time-budget $4 2>&1 | grep -v "^#" | awk 'NF>=4{printf "%s:%s ", $1, $2} END{print ""}'
