#!/bin/bash
# A 2 x 1 lab at 400 Mbit/s (the default tbf, nezha/lab/shaping.py), idle_send.py host0 ->
# host1 with bbr (the lab's default) and cubic, 64 KiB - 1 MiB; tc -s counters; lab down.
# run as: flock -x /tmp/nezha-quiet.lock bash idle_send.sh OUT
out=$1
PY=/work/main/.venv/bin/python
here=$(cd $(dirname $0) && pwd)
export NEZHA_LAB_NAME=hh PYTHONPATH=/work/hH
cd /work/hH
trap '$PY -m nezha lab down >/dev/null 2>&1' EXIT
$PY -m nezha lab up --hosts 2 --rails 1 --rate 400mbit --replace >/dev/null || exit 1
{
echo "# $(date -u +%FT%TZ) lab 2 x 1 400mbit; netns default cc: $(ip netns exec hhh0 sysctl -n net.ipv4.tcp_congestion_control)"
ip netns exec hhh0 tc qdisc show dev rail0
ip netns exec hhsw tc qdisc show dev h1r0
timeout 200 ip netns exec hhh1 $PY $here/idle_send.py serve 5001 &
srv=$!
sleep 0.5
for n in 65536 262144 1048576; do
  for cc in bbr cubic; do
    timeout 60 ip netns exec hhh0 $PY $here/idle_send.py 10.10.0.2 5001 $cc $n
  done
done
echo "# tc -s after (host0 egress, switch egress to host1)"
ip netns exec hhh0 tc -s qdisc show dev rail0
ip netns exec hhsw tc -s qdisc show dev h1r0
kill $srv
} > $out 2>&1
