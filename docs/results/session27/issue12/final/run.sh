#!/bin/bash
# issue 12 on the final tree of session 27: the failover bar with 2 ranks per host (1 KiB and
# 1 MiB, twice) and 2 x 4's allreduce 4 KiB-1 MiB against Open MPI's best and Gloo, under the
# exclusive timing lock; then the one-host shm bar (4 ranks, nezha-shm vs Open MPI sm) and
# this machine's memory-copy limit
PY=/work/main/.venv/bin/python; O=$(dirname $(readlink -f $0)); cd /work/main; mkdir -p /tmp/m27
exec 9>/tmp/nezha-quiet.lock; flock -x 9
for n in 1 2; do
  echo "$(date -u +%H:%M:%S) failover rph2 $n $(git rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  $PY bench/failover.py --sizes 1K,1M --failures 4 --ranks-per-host 2 \
    --json /tmp/m27/fo-rph2-$n.json > $O/failover-rph2-$n.log 2>&1
done
echo "$(date -u +%H:%M:%S) 2x4 small-medium load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
$PY bench/ranks_per_host.py --hosts 2 --ranks-per-host 4 --systems \
  nezha-all,mpi-best-default,mpi-all,mpi-all-ring,gloo-rail0 --sizes 4K,16K,64K,256K,1M \
  --reps 2 --time-budget 1 --run-timeout 300 --out $O/2x4.md > $O/2x4.log 2>&1
echo "$(date -u +%H:%M:%S) memcpy limit load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
$PY bench/memcpy_limit.py --sizes 16M,64M --ranks 4 > $O/memcpy_limit.txt 2>&1
echo "$(date -u +%H:%M:%S) shm loopback load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
$PY bench/compare_loopback.py --backends nezha-shm,mpi-sm --reps 4 -m 4:64M --time-budget 0.3 \
  --max-minutes 10 --out /tmp/m27/shm > $O/shm.log 2>&1; cp /tmp/m27/shm/*.md $O/ 2>/dev/null
echo "$(date -u +%H:%M:%S) end" >> $O/times.txt
