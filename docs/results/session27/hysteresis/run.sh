#!/bin/bash
# issue 15, session 27 (h31): main (1 %-of-payload hysteresis) against h31 (move the split when
# the modelled time saved exceeds 0.5 %), 4 hosts x 1 rank, rails 400 + 100 Mbit/s,
# NEZHA_PROBE=auto, 16 MiB allreduces, 40 calls per job (bench/first_collective.py).
# Run as: flock -x /tmp/nezha-quiet.lock bash run.sh TAG [rounds]   (one hold ~10 min)
#   g3:   A B B A, --reps 3 each, 3 s idle before every job (the case of session 26's 3-4 %)
#   g0:   A B B A, --reps 2 each, back to back
#   g3pf: B A, --reps 3 each, 3 s idle then every rank touches 512 MiB (--prefault-mb 512)
# A = /work/main (0facf34), B = /work/h31. Summarize: python summarize.py /tmp/h31/hy/*.json
PY=/work/main/.venv/bin/python; O=/work/h31/docs/results/session27/hysteresis; L=/tmp/h31/hy
A=/work/main; B=/work/h31; TAG=${1:-r}
lab() { (cd $B && PYTHONPATH=$B timeout 60 $PY -m nezha lab "$@" > /dev/null); }
fc() { tree=$1; tag=$2; shift 2
  echo "$(date -u +%T) $tag $tree load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  (cd $tree && PYTHONPATH=$tree timeout 600 $PY bench/first_collective.py --lab h31a --modes auto \
    --count 40 --cpustat --json $L/$tag.json --log $L/$tag.log "$@") > $O/raw/$tag.txt 2>&1; }
lab up --name h31a --hosts 4 --rails 2 --rate 400mbit,100mbit --replace || exit 1
trap 'lab down --name h31a' EXIT
case ${2:-all} in
all|g3)
  fc $A $TAG-1-main-g3 --reps 3 --gap 3; fc $B $TAG-1-h31-g3 --reps 3 --gap 3
  fc $B $TAG-2-h31-g3 --reps 3 --gap 3; fc $A $TAG-2-main-g3 --reps 3 --gap 3 ;;&
all|g0)
  fc $A $TAG-1-main-g0 --reps 2; fc $B $TAG-1-h31-g0 --reps 2
  fc $B $TAG-2-h31-g0 --reps 2; fc $A $TAG-2-main-g0 --reps 2 ;;&
all|pf)
  fc $B $TAG-1-h31-g3pf --reps 3 --gap 3 --prefault-mb 512
  fc $A $TAG-1-main-g3pf --reps 3 --gap 3 --prefault-mb 512 ;;
esac
