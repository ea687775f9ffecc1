#!/bin/bash
# 2 x 4, 64 KiB and 1 MiB allreduce, nezha-all: main (the merged tree), fix (main + the hop
# cost only with one rank per host), base (0facf34), main fix base base fix main; exclusive lock
PY=/work/main/.venv/bin/python; D=$(dirname $(readlink -f $0))
exec 9>/tmp/nezha-quiet.lock; flock -x 9
for t in main:main1 fix27:fix1 base27:base1 base27:base2 fix27:fix2 main:main2; do
  T=/work/${t%%:*}; n=${t##*:}
  echo "$(date -u +%H:%M:%S) $n $(git -C $T rev-parse --short HEAD) $(git -C $T diff --stat | tail -1)" >> $D/times.txt
  (cd $T && PYTHONPATH=$T $PY bench/ranks_per_host.py --hosts 2 --ranks-per-host 4 \
    --systems nezha-all --sizes 4K,16K,64K,256K,1M --reps 1 --time-budget 1 --run-timeout 200 \
    --out $D/$n.md > $D/$n.log 2>&1)
done
echo "$(date -u +%H:%M:%S) end" >> $D/times.txt
