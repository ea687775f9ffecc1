#!/bin/bash
# usage: runN.sh TREE N [K=V...]
T=$1; N=$2; shift 2
PORT=$((20000 + RANDOM % 20000))
pids=()
for r in $(seq 0 $((N-1))); do
  env PYTHONPATH=$T RANK=$r WORLD_SIZE=$N MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT NEZHA_JOB_SECRET=$(printf '7d%.0s' {1..16}) \
    NEZHA_TIMEOUT=10 NEZHA_CONNECT_TIMEOUT=5 NEZHA_RAILS=loop "$@" timeout 60 /work/main/.venv/bin/python ${SCRIPT:-$(dirname $(readlink -f $0))/idle_death2.py} &
  pids+=($!)
done
for p in "${pids[@]}"; do wait $p; echo "rc=$?"; done
