#!/bin/bash
# examples/train_ddp.py --model mlp --steps 15 --batch 16, lab 4 hosts x 1 rank, 2 x 400 Mbit/s;
# run under flock -x /tmp/nezha-quiet.lock. usage: ddp.sh OUTDIR ROUNDS CONFIG...
# CONFIG = name:tree:backend[:K=V,K=V]; each round runs the configs in order, then reversed
# (ABBA); gloo goes over rail0, nezha over rail0,rail1
source $(dirname $0)/lib.sh
D=$O/$1; R=$2; shift 2; mkdir -p $D
labup; trap labdown EXIT
one() {  # name tree backend env out
  local env=() kv
  for kv in ${4//,/ }; do env+=(-x "$kv"); done
  local ifn=(-x NEZHA_SOCKET_IFNAME=rail0,rail1)
  [ "$3" = gloo ] && ifn=(-x GLOO_SOCKET_IFNAME=rail0)
  echo "$(date -u +%H:%M:%S) $1" >> $D/times.txt
  intree $2 $PY -m nezha lab run --name $LAB --env-rendezvous --timeout 600 -x OMP_NUM_THREADS=1 \
    "${ifn[@]}" "${env[@]}" -- $PY examples/train_ddp.py --backend $3 --model mlp --steps ${STEPS:-15} \
    --batch 16 > $D/$5.txt 2>&1
}
for r in $(seq 1 $R); do
  cfgs=("$@"); [ $((r % 2)) = 0 ] && cfgs=($(printf '%s\n' "$@" | tac))
  for c in "${cfgs[@]}"; do IFS=: read -r n t b e <<< "$c"; one $n $t $b "$e" $n-$r; done
done
