#!/bin/bash
# usage: ddp.sh NAME BACKEND [example args...]   (env passes through)
name=$1; backend=$2; shift 2
cd /work/hC
export PYTHONPATH=/work/hC NEZHA_SOCKET_IFNAME=lo NEZHA_JOB_SECRET=$(printf '%032d' 7) OMP_NUM_THREADS=1 TORCH_DEVICE_BACKEND_AUTOLOAD=0
port=$((29500 + RANDOM % 2000))
timeout 600 /work/main/.venv/bin/python -m torch.distributed.run --nproc-per-node ${NPROC:-4} \
  --master-addr 127.0.0.1 --master-port $port --no-python /tmp/hC/wrap.sh examples/train_ddp.py \
  --backend $backend --model mlp --warmup 0 --steps ${STEPS:-50} --batch 16 "$@" \
  --losses /tmp/hC/$name.json > /tmp/hC/$name.log 2>&1
echo "$name rc=$? $(grep -h 'loss first\|samples/s' /tmp/hC/$name.log | tr '\n' ' ' | cut -c1-150)"
