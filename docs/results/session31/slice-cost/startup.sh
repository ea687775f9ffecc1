#!/bin/bash
# startup.sh TREE OUT [K=V ...]: one 4 x 1 lab job of startup_job.py (lab h53 must be up)
tree=$1 out=$2; shift 2
xs=(); for kv in "$@"; do xs+=(-x "$kv"); done
cd $tree && timeout 120 /work/main/.venv/bin/python -m nezha lab run --name h53 --timeout 100 \
  -x PYTHONPATH=$tree -x NEZHA_SOCKET_IFNAME=rail0,rail1 "${xs[@]}" -- \
  /work/main/.venv/bin/python /work/h53/docs/results/session31/slice-cost/startup_job.py > $out.log 2>&1
grep -E "^RESULT" $out.log | sed 's/^RESULT //' > $out
