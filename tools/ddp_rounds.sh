#!/bin/bash
# issue 14: examples/train_ddp.py in a lab of 4 hosts x 1 rank on 2 rails, ABBA rounds in one
# lab (lab up ... lab down inside); run it under flock -x /tmp/nezha-quiet.lock.
# usage: tools/ddp_rounds.sh OUTDIR RATE ROUNDS CONFIG...   (RATE as for lab up, e.g. 400mbit,100mbit)
# CONFIG = name:backend:IFNAMES[:K=V,K=V]; gloo gets GLOO_SOCKET_IFNAME, nezha NEZHA_SOCKET_IFNAME.
# Environment: TREE (the checkout to run, default this one), LAB (lab name), MODEL_ARGS
# (train_ddp.py's model and batch, default the mlp at batch 16), STEPS (15), TIMEOUT (the
# launcher's, s: 600).
# Each run's output is OUTDIR/<name>-<round>.txt (tools/ddp_summary.py OUTDIR sums them up).
PY=${PY:-/work/main/.venv/bin/python}; T=${TREE:-$(dirname $(dirname $(readlink -f $0)))}
LAB=${LAB:-ddp}; MODEL_ARGS=${MODEL_ARGS:---model mlp --batch 16}; TIMEOUT=${TIMEOUT:-600}
D=$1; RATE=$2; R=$3; shift 3; mkdir -p $D
echo "MODEL_ARGS=$MODEL_ARGS STEPS=${STEPS:-15} tree=$(git -C $T rev-parse --short HEAD)" >> $D/times.txt
$PY -m nezha lab up --name $LAB --hosts 4 --rails 2 --rate $RATE >> $D/lab.log 2>&1 || exit 1
trap '$PY -m nezha lab down --name $LAB >> $D/lab.log 2>&1' EXIT
one() {  # name backend ifnames env out
  local env=() kv var=NEZHA_SOCKET_IFNAME
  for kv in ${4//,/ }; do env+=(-x "$kv"); done
  [ "$2" = gloo ] && var=GLOO_SOCKET_IFNAME
  echo "$(date -u +%H:%M:%S) $5" >> $D/times.txt
  (cd $T && PYTHONPATH=$T $PY -m nezha lab run --name $LAB --env-rendezvous --timeout $TIMEOUT \
    -x OMP_NUM_THREADS=1 -x $var=${3//+/,} "${env[@]}" -- $PY examples/train_ddp.py --backend $2 \
    $MODEL_ARGS --steps ${STEPS:-15} > $D/$5.txt 2>&1)
}
for r in $(seq 1 $R); do
  cfgs=("$@"); [ $((r % 2)) = 0 ] && cfgs=($(printf '%s\n' "$@" | tac))
  for c in "${cfgs[@]}"; do IFS=: read -r n b i e <<< "$c"; one $n $b $i "$e" $n-$r; done
done
echo "$(date -u +%H:%M:%S) end" >> $D/times.txt
