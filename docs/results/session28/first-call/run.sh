#!/bin/bash
# issue 15, session 28 (h36): the first 16 MiB allreduce after idle, and calls 2-5.
# 4 hosts x 1 rank, rails 400 + 100 Mbit/s, NEZHA_PROBE=auto, 40 calls per job
# (bench/first_collective.py). Run as: flock -x /tmp/nezha-quiet.lock bash run.sh TAG WHAT
#   ctl:  B only, 3 s idle before every job, --reps 2 each, order P F S S F P:
#         P = the probe's prior, F = --force-prior 80 (the learned optimum's split forced for
#         the cold calls), S = --prespare (the in-place spare made and touched before call 1)
#   g3:   A B B A, --reps 3 each, 3 s idle before every job
#   g0:   A B B A, --reps 2 each, back to back
#   lc:   B, B --learn-cold (the model learns from call 1 again), same again reversed,
#         --reps 3 each, 3 s idle before every job
# A = /work/main (7cd1213), B = /work/h36. Summarize: python summarize.py /tmp/h36/fc/*.json
PY=/work/main/.venv/bin/python; O=/work/h36/docs/results/session28/first-call; L=/tmp/h36/fc
A=/work/main; B=/work/h36; TAG=${1:-r}
lab() { (cd $B && PYTHONPATH=$B timeout 60 $PY -m nezha lab "$@" > /dev/null); }
fc() { tree=$1; tag=$2; shift 2
  echo "$(date -u +%T) $tag $tree load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times.txt
  (cd $tree && PYTHONPATH=$tree timeout 600 $PY bench/first_collective.py --lab h36a --modes auto \
    --count 40 --cpustat --json $L/$tag.json --log $L/$tag.log "$@") > $O/raw/$tag.txt 2>&1; }
lab up --name h36a --hosts 4 --rails 2 --rate 400mbit,100mbit --replace || exit 1
trap 'lab down --name h36a' EXIT
case ${2:-g3} in
ctl)
  fc $B $TAG-1-P-g3 --reps 2 --gap 3; fc $B $TAG-1-F-g3 --reps 2 --gap 3 --force-prior 80
  fc $B $TAG-1-S-g3 --reps 2 --gap 3 --prespare; fc $B $TAG-2-S-g3 --reps 2 --gap 3 --prespare
  fc $B $TAG-2-F-g3 --reps 2 --gap 3 --force-prior 80; fc $B $TAG-2-P-g3 --reps 2 --gap 3 ;;
g3)
  fc $A $TAG-1-main-g3 --reps 3 --gap 3; fc $B $TAG-1-h36-g3 --reps 3 --gap 3
  fc $B $TAG-2-h36-g3 --reps 3 --gap 3; fc $A $TAG-2-main-g3 --reps 3 --gap 3 ;;
lc)
  # (b2 ran these as $TAG-K-h36-g3, the g3 arm's names: see README, "recovered")
  fc $B l$TAG-1-h36-g3 --reps 3 --gap 3; fc $B l$TAG-1-h36lc-g3 --reps 3 --gap 3 --learn-cold
  fc $B l$TAG-2-h36lc-g3 --reps 3 --gap 3 --learn-cold; fc $B l$TAG-2-h36-g3 --reps 3 --gap 3 ;;
hp)
  fc $B $TAG-1-H-g3 --reps 3 --gap 3; fc $B $TAG-1-K-g3 --reps 3 --gap 3 -x H36_SPARE_HUGE=0
  fc $B $TAG-2-K-g3 --reps 3 --gap 3 -x H36_SPARE_HUGE=0; fc $B $TAG-2-H-g3 --reps 3 --gap 3 ;;
g0)
  fc $A $TAG-1-main-g0 --reps 2; fc $B $TAG-1-h36-g0 --reps 2
  fc $B $TAG-2-h36-g0 --reps 2; fc $A $TAG-2-main-g0 --reps 2 ;;
esac
# hp (an experiment, with a temporary H36_SPARE_HUGE read in communicator.py, not committed):
# B with the init spare on 2 MiB pages (H) against 4 KiB pages (K), A B B A, --reps 3, g3:
#   flock -x /tmp/nezha-quiet.lock bash run.sh h1 hp
