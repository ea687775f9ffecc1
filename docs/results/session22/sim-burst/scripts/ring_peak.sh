#!/bin/bash
# Why a nezha allreduce gets no burst credit when one TCP stream does (idle_send.sh):
# a 4 x 2 lab; bench/idle_burst.py (idle 0 / 1.5 / 6 ms, 20 rounds) at 400 + 400 Mbit/s with
# the host-egress tbf counters around it, then the same with both rails at 3200 Mbit/s
# (about unshaped on this machine: LAB.md §1) to see how fast the call runs when the
# wire is not what limits it. Lab down at the end.
# run as: flock -x /tmp/nezha-quiet.lock bash ring_peak.sh OUT
out=$1
source "$(dirname "$0")/ring_lib.sh"
tcs() { ip netns exec hhh0 tc -s qdisc show dev rail0 | sed -n 2p; ip netns exec hhsw tc -s qdisc show dev h1r0 | sed -n 2p; }
{
echo "# $(date -u +%FT%TZ) lab 4 x 2, $(git -C /work/hH rev-parse --short HEAD)"
for rate in 400mbit 3200mbit; do
  $PY -m nezha lab rate 0 $rate >/dev/null; $PY -m nezha lab rate 1 $rate >/dev/null
  echo "## rails at $rate; tc -s host0 rail0 egress, switch->host1 rail0 egress, before:"; tcs
  for s in 256K 1M; do run $s; done
  echo "after:"; tcs
done
} > $out 2>&1
