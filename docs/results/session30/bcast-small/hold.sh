#!/bin/bash
# One flock -x hold (run it under the lock): variants.py on 400 + 100 (lab h47) and 400 + 400
# (lab h47e), 1-4 KiB, 20 rounds of 200 calls; then A B B A of bench compare (broadcast 256 B-16 KiB)
# on both rate pairs, A = /work/h47-base (main 7b92de3), B = /work/h47.
D=$(dirname $(readlink -f $0)); PY=/work/main/.venv/bin/python; mkdir -p $D/runs /tmp/h47
for lab in h47:unequal h47e:equal; do
  L=${lab%%:*}; TAG=variants-${lab##*:}-2
  echo "$(date -u +%H:%M:%S) start $TAG $(git -C /work/h47 rev-parse --short HEAD)" >> $D/times.txt
  (cd /work/h47 && NEZHA_LAB_NAME=$L timeout 300 $PY -m nezha lab run --timeout 280 --mca btl_tcp_if_include rail0 \
     -x PYTHONPATH=/work/h47 -x NEZHA_SOCKET_IFNAME=rail0,rail1 -- $PY $D/variants.py 1024,2048,4096 200 20 > $D/runs/$TAG.log 2>&1)
  echo "$(date -u +%H:%M:%S) end $TAG rc $?" >> $D/times.txt
done
for rates in 400mbit,100mbit 400mbit; do
  for t in h47-base:A1 h47:B1 h47:B2 h47-base:A2; do
    T=/work/${t%%:*}; TAG=${rates//,/-}-${t##*:}
    cmd="$PY -m nezha bench compare --rates $rates --collectives broadcast --systems nezha-all,mpi-all,mpi-rail0 --min-size 256 --max-size 16K --reps 1 --reps-other 3 --time-budget 0.3 --no-lab-check --out /tmp/h47/$TAG"
    echo "$(date -u +%H:%M:%S) start $TAG $(git -C $T rev-parse --short HEAD): $cmd" >> $D/times.txt
    (cd $T && PYTHONPATH=$T timeout 400 $cmd > /tmp/h47/$TAG.log 2>&1)
    echo "$(date -u +%H:%M:%S) end $TAG rc $?" >> $D/times.txt
    mkdir -p $D/runs/$TAG; cp /tmp/h47/$TAG/compare.md /tmp/h47/$TAG.log $D/runs/$TAG/ 2>/dev/null
    gzip -c /tmp/h47/$TAG/compare.json > $D/runs/$TAG/compare.json.gz 2>/dev/null
  done
done
