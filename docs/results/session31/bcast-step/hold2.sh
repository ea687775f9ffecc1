#!/bin/bash
# One exclusive hold: the first 1.5 s after the communicator is up (ramp.py), then the barrier swap (step.py with each library's call timed in the other's
# barrier loop) on both labs, B (/work/h54) only, twice each.
D=$(dirname $(readlink -f $0)); PY=/work/main/.venv/bin/python; T=/work/h54
exec 9>/tmp/nezha-quiet.lock; flock -x 9
log() { echo "$(date -u +%T) $*" >> $D/times.txt; }
for lab in h54e:equal h54u:unequal; do
  L=${lab%%:*}
  for m in nz:4 mpi:4 nz-rs:16 mpi-rs:16 nz:1024 nz-nofo:4; do
    M=${m%%:*}; N=${m##*:}; X=; [ $M = nz-nofo ] && { M=nz; X="-x NEZHA_FAILOVER=n"; }
    TAG=ramp-${lab##*:}-${m/:/-}
    log "start $TAG $(git -C $T rev-parse --short HEAD) $T $X"
    (cd $T && NEZHA_LAB_NAME=$L timeout 100 $PY -m nezha lab run --timeout 90 --mca btl_tcp_if_include rail0 \
      -x PYTHONPATH=$T -x NEZHA_SOCKET_IFNAME=rail0,rail1 $X -- $PY $D/ramp.py $M 1.5 $N > $D/runs/$TAG.log 2>&1)
    log "end $TAG rc $?"
  done
done
V=nz-bcast,nz-bcast/mb,mpi-bcast,mpi-bcast/nb,nz-rs,nz-rs/mb,mpi-rs,mpi-rs/nb
for i in 1 2; do
  for lab in h54e:equal h54u:unequal; do
    L=${lab%%:*}; TAG=swap-${lab##*:}-$i
    log "start $TAG $(git -C $T rev-parse --short HEAD) $T"
    (cd $T && NEZHA_LAB_NAME=$L timeout 200 $PY -m nezha lab run --timeout 180 --mca btl_tcp_if_include rail0 \
      -x PYTHONPATH=$T -x NEZHA_SOCKET_IFNAME=rail0,rail1 -- $PY $D/step.py $V 4,16,1024,2048 300 6 > $D/runs/$TAG.log 2>&1)
    log "end $TAG rc $?"
  done
done
