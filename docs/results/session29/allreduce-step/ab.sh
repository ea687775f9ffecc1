#!/bin/bash
# A B B A: main (A, /work/h43-base) against h43 (B), each compare under flock -x on its own.
# usage: [SERIES=equal MIN=1K] bash ab.sh OUTROOT   (writes OUTROOT/{unequal,equal}-{A1,B1,B2,A2}/ and times.txt)
out=${1:-/tmp/h43/ab}
mkdir -p $out
run() {  # tag tree rates
  cd /work/$2 || exit 1
  echo "$(date -u +%T) start $1 $2 $(git -C /work/$2 rev-parse --short HEAD)" >> $out/times.txt
  timeout 1500 flock -x /tmp/nezha-quiet.lock /work/main/.venv/bin/python -m nezha bench compare \
    --rates $3 --collectives allreduce --systems nezha-all,nezha-rail0,mpi-all,mpi-rail0 \
    --min-size ${MIN:-4} --max-size 128K --reps 3 --time-budget 0.3 --out $out/$1 > $out/$1.log 2>&1
  echo "$(date -u +%T) end $1 rc $?" >> $out/times.txt
}
# the unequal series ran with --min-size 4; the equal one (queued behind other helpers' runs)
# with MIN=1K (4 B is covered by the unequal runs)
if [ "${SERIES:-unequal}" = unequal ]; then
run unequal-A1 h43-base 400mbit,100mbit
run unequal-B1 h43 400mbit,100mbit
run unequal-B2 h43 400mbit,100mbit
run unequal-A2 h43-base 400mbit,100mbit
else
run equal-A1 h43-base 400mbit
run equal-B1 h43 400mbit
run equal-B2 h43 400mbit
run equal-A2 h43-base 400mbit
fi
