#!/bin/bash
# Is it TCP's congestion control that spends no burst? a 4 x 2 lab at 400 + 400 Mbit/s,
# bench/idle_burst.py (idle 0 / 1.5 / 6 ms, 20 rounds) with the hosts' default cc bbr, then
# cubic (no pacing), then bbr again (ABA). Lab down at the end.
# run as: flock -x /tmp/nezha-quiet.lock bash ring_cc.sh OUT
out=$1
PY=/work/main/.venv/bin/python
export NEZHA_LAB_NAME=hh PYTHONPATH=/work/hH
cd /work/hH
trap '$PY -m nezha lab down >/dev/null 2>&1' EXIT
$PY -m nezha lab up --hosts 4 --rails 2 --rate 400mbit --replace >/dev/null || exit 1
run() {  # size
  $PY -m nezha lab run --timeout 120 -x NEZHA_SOCKET_IFNAME=rail0,rail1 -- \
     $PY bench/idle_burst.py --size $1 --idle-ms 0,1.5,6 --calls 20 2>&1 \
     | $PY -c "import json,sys; t=sys.stdin.read(); d=json.loads(t[t.index('{'):t.rindex('}')+1]); print('$1', d['median_us'], d['vs_idle0'])"
}
{
echo "# $(date -u +%FT%TZ) lab 4 x 2 400mbit, $(git -C /work/hH rev-parse --short HEAD)"
for cc in bbr cubic bbr; do
  for i in 0 1 2 3; do ip netns exec hhh$i sysctl -qw net.ipv4.tcp_congestion_control=$cc; done
  echo "## cc $cc"
  for s in 256K 1M; do run $s; done
done
} > $out 2>&1
