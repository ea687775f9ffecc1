#!/bin/bash
# TCP rail0 alone, TCP both rails, TCP rail0 + INA on rail1: allreduce busbw, one lab, one run
cd "$(dirname "$0")/../../.."
N=.venv/bin/nezha
$N lab up --name nzina --hosts 4 --rails 2 --rate 400mbit --ina 1 --replace >/dev/null || exit 1
trap "$N lab down --name nzina >/dev/null" EXIT
for rep in 1 2; do
for cfg in "rail0 tcp,shm" "rail0,rail1 tcp,shm" "rail0 tcp,shm,ina"; do
  set -- $cfg
  echo "## rep $rep NEZHA_SOCKET_IFNAME=$1 NEZHA_RAILS=$2"
  $N lab run --name nzina --env-rendezvous --timeout 600 -x NEZHA_SOCKET_IFNAME=$1 -x NEZHA_RAILS=$2 -- \
     .venv/bin/python bench/osu_allreduce.py -m 1M:64M --bw -c 2>&1 | grep -v "^#\|^$" | tail -8
done; done
