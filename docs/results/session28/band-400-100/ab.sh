#!/bin/bash
# A B B A: main (A, run from /work/main) against h39 (B, from /work/h39), 400 + 100 then one
# A B pair on equal rails; each step one compare under the exclusive lock (its lab built and
# removed inside it, NEZHA_LAB_NAME=h39ab). usage: STEPS="u:A1 u:B1 u:B2 u:A2 e:A1 e:B1" bash ab.sh
D=$(dirname $(readlink -f $0)); PY=/work/main/.venv/bin/python; mkdir -p /tmp/h39
for st in ${STEPS:-u:A1 u:B1 u:B2 u:A2 e:A1 e:B1}; do
  kind=${st%%:*}; tag=${st##*:}
  case ${tag:0:1} in A) T=/work/main ;; B) T=/work/h39 ;; esac
  if [ $kind = u ]; then R=400mbit,100mbit; S=nezha-all,mpi-all,mpi-rail0,mpi-all-tuned; n=unequal
  else R=400mbit; S=nezha-all,mpi-all,mpi-rail0; n=equal; fi
  OUT=/tmp/h39/$n-$tag
  cmd="$PY -m nezha bench compare --rates $R --collectives allreduce,allgather --systems $S --min-size 2K --max-size 32K --reps 3 --reps-other 3 --time-budget 0.3 --out $OUT"
  (cd $T && export PYTHONPATH=$T NEZHA_LAB_NAME=h39ab && flock -x /tmp/nezha-quiet.lock bash -c "echo \"\$(date -u +%H:%M:%S) start $n-$tag $(git -C $T rev-parse --short HEAD) load \$(cut -d' ' -f1-3 /proc/loadavg): $cmd\" >> $D/times.txt; timeout 900 $cmd > $OUT.log 2>&1; echo \"\$(date -u +%H:%M:%S) end $n-$tag rc \$?\" >> $D/times.txt")
  mkdir -p $D/ab/$n-$tag; cp $OUT/compare.md $D/ab/$n-$tag/ 2>/dev/null; cp $OUT.log $D/ab/$n-$tag/run.log
  $PY $D/slim.py $OUT $D/ab/$n-$tag 2>/dev/null
done
