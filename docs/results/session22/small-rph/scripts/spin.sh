#!/bin/bash
for s in 200 1000 1000 200; do echo "== spin $s 2x4"; PROF_OSU=1 PROF_ONLY_WORLD=1 PROF_CALLS=2000 EXTRA="-x NEZHA_SPIN_US=$s" /tmp/h16/prof.sh 2 4 /work/hI 2>&1 | grep -E "world"; done
