#!/bin/bash
# Loopback, 4 ranks, TCP on lo (compare_loopback.py's flags): nezha's ring allreduce with
# NEZHA_SEGMENT_SIZE 256k (default) / 64k / 1m against Open MPI, 1-8 MiB, in the order
# mpi d 64k 1m 1m 64k d mpi (OSU loop, mean over ranks not needed: rank 0's avg, us).
# usage (exclusive lock): flock -x /tmp/nezha-quiet.lock seg.sh > seg.txt
PY=/work/main/.venv/bin/python; T=/work/h24; MPIRUN=$(dirname $PY)/mpirun
echo "$(date -u +%H:%M:%S) start load $(cut -d' ' -f1-3 /proc/loadavg)"
run() {  # backend, extra -x
  $MPIRUN --allow-run-as-root --oversubscribe -np 4 --bind-to none --mca mpi_yield_when_idle 1 \
    --mca btl tcp,self --mca btl_tcp_if_include lo --mca pml ob1 \
    -x PYTHONPATH=$T -x NEZHA_SOCKET_IFNAME=lo -x NEZHA_RAILS=tcp $2 \
    $PY $T/bench/osu_allreduce.py --backend $1 -m 1M:8M -l --time-budget 0.4 2>&1 | grep -v "^#" | awk 'NF>1{print $1, $2}'
}
for v in mpi d 64k 1m 1m 64k d mpi; do
  echo "== $v"
  case $v in
    mpi) run mpi "" ;;
    d) run nezha "" ;;
    *) run nezha "-x NEZHA_SEGMENT_SIZE=$v" ;;
  esac
done
echo "$(date -u +%H:%M:%S) end"
