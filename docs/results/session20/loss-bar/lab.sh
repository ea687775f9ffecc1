#!/bin/bash
# under flock -x /tmp/nezha-quiet.lock: build the lab, run the loss checks, take it down
cd /work/hC
export PYTHONPATH=/work/hC NEZHA_LAB_NAME=hc
N="/work/main/.venv/bin/python -m nezha lab"
P=/work/main/.venv/bin/python
O=/tmp/hC/lab
mkdir -p $O
$N down >/dev/null 2>&1
$N up --hosts 4 --rails 2 --rate 400mbit || exit 1
run() {  # name backend steps [env...] -- [args...]
  local name=$1 backend=$2 steps=$3; shift 3
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  local ifn="-x NEZHA_SOCKET_IFNAME=rail0,rail1"
  [ "$backend" = gloo ] && ifn="-x GLOO_SOCKET_IFNAME=rail0"
  timeout 400 $N run --env-rendezvous --timeout 300 -x OMP_NUM_THREADS=1 $ifn "${envs[@]}" -- \
    $P examples/train_ddp.py --backend $backend --model mlp --steps $steps --warmup 0 --batch 16 \
    --losses $O/$name.json "$@" > $O/$name.log 2>&1
  echo "$name rc=$? $(date +%T) $(grep -h 'samples/s\|losses\|loss first' $O/$name.log | cut -c1-120 | tr '\n' ' ')"
}
date
run gelu-gloo gloo 50 -- --act gelu
run gelu-nezha-a nezha 50 NEZHA_PROGRESS_SCHED=fifo -- --act gelu --compare-losses $O/gelu-gloo.json
run gelu-nezha-b nezha 50 -- --act gelu --compare-losses $O/gelu-gloo.json
run relu-gloo gloo 20 --
run relu-nezha-a nezha 20 --
run relu-nezha-b nezha 20 --
run relu-nezha-eq-a nezha 20 NEZHA_SPLIT=equal --
run relu-nezha-eq-b nezha 20 NEZHA_SPLIT=equal --
$N down
date
