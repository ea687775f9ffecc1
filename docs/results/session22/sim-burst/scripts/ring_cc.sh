#!/bin/bash
# Is it TCP's congestion control that spends no burst? a 4 x 2 lab at 400 + 400 Mbit/s,
# bench/idle_burst.py (idle 0 / 1.5 / 6 ms, 20 rounds) with the hosts' default cc bbr, then
# cubic (no pacing), then bbr again (ABA). Lab down at the end.
# run as: flock -x /tmp/nezha-quiet.lock bash ring_cc.sh OUT
out=$1
source "$(dirname "$0")/ring_lib.sh"
{
echo "# $(date -u +%FT%TZ) lab 4 x 2 400mbit, $(git -C /work/hH rev-parse --short HEAD)"
for cc in bbr cubic bbr; do
  for i in 0 1 2 3; do ip netns exec hhh$i sysctl -qw net.ipv4.tcp_congestion_control=$cc; done
  echo "## cc $cc"
  for s in 256K 1M; do run $s; done
done
} > $out 2>&1
