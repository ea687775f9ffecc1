#!/bin/bash
PY=/work/main/.venv/bin/python
cd /tmp
PYTHONPATH=/work/main $PY -m nezha lab up --name h33 --hosts 4 --rails 2 --rate 400mbit,100mbit --ina 1 || exit 1
for T in ${ORDER:-/work/main /work/h33}; do
  echo "== $T"
  PYTHONPATH=$T timeout 300 $PY -m nezha lab run --name h33 --env-rendezvous -- env PYTHONPATH=$T NEZHA_SOCKET_IFNAME=rail0 NEZHA_RAILS=tcp,shm,ina $PY /work/h33/docs/results/session27/ina-window/slow_direct_rank.py 2>&1 | grep -E "RESULT|WINDOW|WARN|rror" | head -20
done
PYTHONPATH=/work/main $PY -m nezha lab down --name h33
