#!/bin/bash
# System calls per iteration (call + barrier, OSU's loop) on loopback, 4 ranks, TCP only, from
# tree A and B, with perf stat around the counting loop only (perfwrap.sh). Counts, not
# timings: run under the shared lock. usage: counts.sh TREE TAG VARIANT SIZE [N]
D=$(dirname $(readlink -f $0)); T=$1 TAG=$2 V=$3 S=$4 N=${5:-2000}
P=/tmp/h54/perf-$TAG; rm -rf $P; mkdir -p $P $D/runs/counts
cd $T && PYTHONPATH=$T NEZHA_SOCKET_IFNAME=lo NEZHA_RAILS=tcp STEP_PERF=$P timeout 120 \
  /work/main/.venv/bin/python -m nezha mpirun -np 4 --timeout 100 -- $D/perfwrap.sh \
  /work/main/.venv/bin/python $D/step.py $V $S $N 1 > $P/out.log 2>&1
{ echo "# $TAG: $V $S B, $N iterations, tree $T ($(git -C $T rev-parse --short HEAD)); per iteration"
  grep -v JSON $P/out.log | grep -E "OSU|after rank"
  for r in 0 1 2 3; do echo "rank $r: $(awk -F, -v n=$N '$1>0 && NR>2 {printf "%s=%.2f ", $3, $1/n}' $P/perf.$r | sed 's/syscalls:sys_exit_recvfrom/recvfrom-with-bytes/; s/syscalls:sys_exit_readv/readv-with-bytes/; s/syscalls:sys_enter_//g; s/raw_syscalls:sys_enter/syscalls/')"; done
} > $D/runs/counts/$TAG.txt
cat $D/runs/counts/$TAG.txt
